package sockmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// ErrFull: every session slot is taken.
var ErrFull = errors.New("sockmap: no free session slot")

// Relay holds the maps and programs. The zero value is not usable; call Load.
type Relay struct {
	route, slots, tcp, unix *ebpf.Map
	tcpVerdict, unixVerd    *ebpf.Program
	mem                     *ebpf.Memory

	mu   sync.Mutex
	free []uint32 // free session indexes
}

// Load creates the maps and loads and attaches the programs, for up to
// maxSessions sessions at once.
func Load(maxSessions int) (*Relay, error) {
	if maxSessions <= 0 {
		maxSessions = 4096
	}
	r := &Relay{}
	ok := false
	defer func() {
		if !ok {
			r.Close()
		}
	}()
	var err error
	n := uint32(maxSessions)
	if r.route, err = ebpf.NewMap(&ebpf.MapSpec{Name: "pgb_route", Type: ebpf.Hash, KeySize: 8, ValueSize: 16, MaxEntries: 3 * n}); err != nil {
		return nil, fmt.Errorf("route map: %w", err)
	}
	if r.slots, err = ebpf.NewMap(&ebpf.MapSpec{Name: "pgb_slots", Type: ebpf.Array, KeySize: 4, ValueSize: slotSize,
		MaxEntries: 3 * n, Flags: 1 << 10 /* BPF_F_MMAPABLE */}); err != nil {
		return nil, fmt.Errorf("slots map: %w", err)
	}
	if r.mem, err = r.slots.Memory(); err != nil {
		return nil, fmt.Errorf("map slots: %w", err)
	}
	if r.tcp, err = ebpf.NewMap(&ebpf.MapSpec{Name: "pgb_tcp", Type: ebpf.SockHash, KeySize: 8, ValueSize: 8, MaxEntries: 2 * n}); err != nil {
		return nil, fmt.Errorf("tcp sockhash: %w", err)
	}
	if r.unix, err = ebpf.NewMap(&ebpf.MapSpec{Name: "pgb_unix", Type: ebpf.SockHash, KeySize: 8, ValueSize: 8, MaxEntries: n}); err != nil {
		return nil, fmt.Errorf("unix sockhash: %w", err)
	}
	load := func(name string, at ebpf.AttachType, insns asm.Instructions) (*ebpf.Program, error) {
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: name, Type: ebpf.SkSKB, AttachType: at, Instructions: insns, License: "Dual BSD/GPL"})
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", name, err)
		}
		return p, nil
	}
	if r.tcpVerdict, err = load("pgb_tcp_verdict", ebpf.AttachSkSKBStreamVerdict, verdict(r.route, r.slots, r.unix, true)); err != nil {
		return nil, err
	}
	if r.unixVerd, err = load("pgb_unix_verdict", ebpf.AttachSkSKBStreamVerdict, verdict(r.route, r.slots, r.tcp, false)); err != nil {
		return nil, err
	}
	for _, a := range []struct {
		m  *ebpf.Map
		p  *ebpf.Program
		at ebpf.AttachType
	}{{r.tcp, r.tcpVerdict, ebpf.AttachSkSKBStreamVerdict},
		{r.unix, r.unixVerd, ebpf.AttachSkSKBStreamVerdict}} {
		if err := link.RawAttachProgram(link.RawAttachProgramOptions{Target: a.m.FD(), Program: a.p, Attach: a.at}); err != nil {
			return nil, fmt.Errorf("attach %v: %w", a.at, err)
		}
	}
	r.free = make([]uint32, 0, n)
	for i := n; i > 0; i-- {
		r.free = append(r.free, i-1)
	}
	ok = true
	return r, nil
}

// Close detaches the programs and frees the maps. Sessions must have been removed.
func (r *Relay) Close() {
	detach := func(m *ebpf.Map, p *ebpf.Program, at ebpf.AttachType) {
		if m != nil && p != nil {
			link.RawDetachProgram(link.RawDetachProgramOptions{Target: m.FD(), Program: p, Attach: at})
		}
	}
	detach(r.tcp, r.tcpVerdict, ebpf.AttachSkSKBStreamVerdict)
	detach(r.unix, r.unixVerd, ebpf.AttachSkSKBStreamVerdict)
	for _, p := range []*ebpf.Program{r.tcpVerdict, r.unixVerd} {
		if p != nil {
			p.Close()
		}
	}
	for _, m := range []*ebpf.Map{r.route, r.slots, r.tcp, r.unix} {
		if m != nil {
			m.Close()
		}
	}
}

// Entries counts the sockets in the TCP and the unix map.
func (r *Relay) Entries() (tcp, unix int) {
	count := func(m *ebpf.Map) int {
		n := 0
		var k, v uint64
		it := m.Iterate()
		for it.Next(&k, &v) {
			n++
		}
		return n
	}
	return count(r.tcp), count(r.unix)
}

// Dir is one direction of a session.
type Dir int

// Directions.
const (
	ToServer Dir = 0 // client bytes, from the TCP socket
	ToClient Dir = 1 // server bytes, from the unix socket
	// Inject carries bytes the proxy writes toward the server through the same
	// kernel queue as the redirected client bytes, so that they arrive after them.
	Inject Dir = 2
)

// Slot is what a direction's slot holds.
type Slot struct {
	Bytes  uint64 // redirected in the kernel
	Passed uint64 // handed to the proxy to read
	Ack    uint64 // handed-over bytes the proxy forwarded
	Limit  uint64 // redirect while Bytes stays at or below; 0: no limit
	Hold   uint64 // non-zero: everything is handed to the proxy
	Flags  uint64 // FlagTerminate, FlagOverLimit, FlagLost
	// Boundary: the client direction's next byte starts a message (its
	// Terminate excepted); Unsynced: the client sent messages after its last
	// Query, Sync or FunctionCall, other than a Query's copy data ended by
	// CopyDone or CopyFail (for the client direction).
	Boundary, Unsynced bool
}

func (r *Relay) slotOff(idx uint32, d Dir) int64 { return int64(3*idx+uint32(d)) * slotSize }

func (r *Relay) read(idx uint32, d Dir, off int64) uint64 {
	if idx == noSlot {
		return 0
	}
	var b [8]byte
	r.mem.ReadAt(b[:], r.slotOff(idx, d)+off)
	return binary.NativeEndian.Uint64(b[:])
}

func (r *Relay) write(idx uint32, d Dir, off int64, v uint64) {
	if idx == noSlot {
		return
	}
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], v)
	r.mem.WriteAt(b[:], r.slotOff(idx, d)+off)
}

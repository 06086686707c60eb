package sockmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/cilium/ebpf"
	"sync/atomic"
)

// Session is one spliced session: a client's TCP socket and a branch server's
// unix socket. Its methods are safe for concurrent use with the programs; one
// goroutine at a time should drive a session.
type Session struct {
	r             *Relay
	idx           atomic.Uint32 // slot; noSlot once removed (read by other goroutines)
	cc, cs, peer  uint64        // cookies: client, server socket, server's peer
	inTCP, inUnix bool
	routed        bool
	inject        uint64 // cookie of the injector's receiving socket; 0: none
}

// Add splices client (a TCP socket) and server (a connected unix socket). Both
// directions start held (handed to the proxy, see Hold) so that what either side
// sent before the splice is forwarded first.
func (r *Relay) Add(client, server int) (*Session, error) {
	cc, err := Cookie(client)
	if err != nil {
		return nil, err
	}
	cs, err := Cookie(server)
	if err != nil {
		return nil, err
	}
	peer, err := PeerCookie(server)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if len(r.free) == 0 {
		r.mu.Unlock()
		return nil, ErrFull
	}
	idx := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	r.mu.Unlock()
	s := &Session{r: r, cc: cc, cs: cs, peer: peer}
	s.idx.Store(idx)
	var zero [3 * slotSize]byte
	r.mem.WriteAt(zero[:], r.slotOff(idx, ToServer))
	r.write(idx, ToServer, offHold, 1)
	r.write(idx, ToClient, offHold, 1)
	if err := s.link(client, server); err != nil {
		s.Remove()
		return nil, err
	}
	return s, nil
}

func (s *Session) link(client, server int) error {
	r := s.r
	route := func(key, dst uint64, d Dir) error {
		v := make([]byte, 16)
		binary.NativeEndian.PutUint64(v, dst)
		binary.NativeEndian.PutUint32(v[8:], 3*s.idx.Load()+uint32(d))
		return r.route.Put(key, v)
	}
	s.routed = true
	if err := route(s.cc, s.cs, ToServer); err != nil {
		return fmt.Errorf("route client: %w", err)
	}
	if err := route(s.peer, s.cc, ToClient); err != nil {
		return fmt.Errorf("route server: %w", err)
	}
	if err := r.tcp.Put(s.cc, uint64(client)); err != nil {
		return fmt.Errorf("add client socket: %w", err)
	}
	s.inTCP = true
	if err := r.unix.Put(s.cs, uint64(server)); err != nil {
		return fmt.Errorf("add server socket: %w", err)
	}
	s.inUnix = true
	return nil
}

// Injector is the receiving end of a TCP connection in the TCP map. While a
// session uses it, its bytes go to that session's server behind what was
// redirected to it before: what the proxy writes on the other end follows the
// kernel's queue instead of overtaking it. Between sessions it carries nothing.
type Injector struct{ cookie uint64 }

// NewInjector puts fd, the receiving end of a TCP connection, into the TCP map.
func (r *Relay) NewInjector(fd int) (*Injector, error) {
	c, err := Cookie(fd)
	if err != nil {
		return nil, err
	}
	if err := r.tcp.Put(c, uint64(fd)); err != nil {
		return nil, fmt.Errorf("add injector socket: %w", err)
	}
	return &Injector{cookie: c}, nil
}

// DropInjector takes an injector out of the TCP map.
func (r *Relay) DropInjector(in *Injector) error {
	if err := r.tcp.Delete(in.cookie); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("remove injector socket: %w", err)
	}
	return nil
}

// UseInjector sends the injector's bytes to the session's server until Remove.
func (s *Session) UseInjector(in *Injector) error {
	r := s.r
	r.write(s.idx.Load(), Inject, offFlags, FlagLost) // not a client: no Terminate to find
	v := make([]byte, 16)
	binary.NativeEndian.PutUint64(v, s.cs)
	binary.NativeEndian.PutUint32(v[8:], 3*s.idx.Load()+uint32(Inject))
	if err := r.route.Put(in.cookie, v); err != nil {
		return fmt.Errorf("route injector: %w", err)
	}
	s.inject = in.cookie
	return nil
}

// Slot reads direction d's slot.
func (s *Session) Slot(d Dir) Slot {
	r, i := s.r, s.idx.Load()
	return Slot{Bytes: r.read(i, d, offBytes), Passed: r.read(i, d, offPassed), Ack: r.read(i, d, offAck),
		Limit: r.read(i, d, offLimit), Hold: r.read(i, d, offHold), Flags: r.read(i, d, offFlags),
		Boundary: r.read(i, d, offRem) == 0 && r.read(i, d, offHdrN) == 0, Unsynced: r.read(i, d, offUnsync) != 0}
}

// Hold makes direction d hand every message to the proxy (on) or redirect again
// once the proxy has acknowledged what it was handed (off).
func (s *Session) Hold(d Dir, on bool) {
	v := uint64(0)
	if on {
		v = 1
	}
	s.r.write(s.idx.Load(), d, offHold, v)
}

// Ack tells direction d's program that the proxy has forwarded n handed-over bytes
// in all.
func (s *Session) Ack(d Dir, n uint64) { s.r.write(s.idx.Load(), d, offAck, n) }

// Limit lets direction d redirect while its redirected bytes stay at or below n;
// past it, messages are handed to the proxy and FlagOverLimit is set. 0: no limit.
func (s *Session) Limit(d Dir, n uint64) { s.r.write(s.idx.Load(), d, offLimit, n) }

// Remove takes both sockets out of the maps, unroutes the session's injector and
// frees the slot. Bytes still queued
// in the kernel for either socket are dropped: hold both directions and drain
// first.
func (s *Session) Remove() error {
	r := s.r
	var errs []error
	if s.inTCP {
		if err := r.tcp.Delete(s.cc); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("remove client socket: %w", err))
		}
		s.inTCP = false
	}
	if s.inUnix {
		if err := r.unix.Delete(s.cs); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("remove server socket: %w", err))
		}
		s.inUnix = false
	}
	if s.inject != 0 {
		r.route.Delete(s.inject) // the injector stays in the TCP map, carrying nothing
		s.inject = 0
	}
	if s.routed {
		r.route.Delete(s.cc)
		r.route.Delete(s.peer)
		s.routed = false
	}
	if i := s.idx.Swap(noSlot); i != noSlot {
		r.mu.Lock()
		r.free = append(r.free, i)
		r.mu.Unlock()
	}
	return errors.Join(errs...)
}

const noSlot = ^uint32(0)

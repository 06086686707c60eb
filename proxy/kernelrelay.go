package proxy

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/proxy/sockmap"
	"golang.org/x/sys/unix"
)

// A kernelRelay carries plaintext sessions in the kernel: after login both of a
// session's sockets go into BPF socket maps whose programs move the bytes, and the
// proxy only watches. One loop, parked in Go's poller, watches every spliced
// session: hang-ups with epoll (only EPOLLRDHUP, EPOLLHUP and EPOLLERR: EPOLLIN
// would fire on every packet), and every tick the sessions' slots (a memory map,
// no system call) and, for sessions that moved bytes, their sockets' queues, to
// keep the backlog toward the server under a cap and to cut off clients that stop
// reading. What needs doing is handed to the session's own goroutine.
//
// Safe for concurrent use.
type kernelRelay struct {
	sm      *sockmap.Relay
	backlog uint64        // bytes the client may have redirected beyond what the server took
	tick    time.Duration // how often the loop looks at the slots
	basesAt time.Time     // when sweepRefs last read sessions' bases (loop only)
	epfd    int
	wake    int
	injLn   *net.TCPListener // injector connections (see sockmap.Injector)
	injMu   sync.Mutex       // one dial and accept at a time; guards injPool
	injPool []*injector      // injectors between sessions

	mu       sync.Mutex
	byFD     map[int32]*ksession
	sessions map[*ksession]struct{}
	stop     bool
	wg       sync.WaitGroup // sessions
	done     chan struct{}
}

// baseDelay is the age from which a session's client socket is first counted,
// and the least time between two passes that count new sessions.
const baseDelay = 100 * time.Millisecond

// Events the loop hands to a session's goroutine.
const (
	evClientHup = 1 << iota
	evServerHup
	evHeld    // a direction hands bytes to the proxy: forward them
	evStalled // the client has not read for the write timeout
	evStop    // the proxy shuts down
	evBroken  // a forward failed mid-stream: end as if the server closed
)

// errKernelRelayStopped: the relay is shutting down and takes no sessions.
var errKernelRelayStopped = errors.New("kernel relay stopped")

func newKernelRelay(maxSessions int, backlog uint64) (*kernelRelay, error) {
	sm, err := sockmap.Load(maxSessions)
	if err != nil {
		return nil, err
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		sm.Close()
		return nil, fmt.Errorf("epoll: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err == nil {
		err = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)})
	}
	if err != nil {
		sm.Close()
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		sm.Close()
		unix.Close(epfd)
		unix.Close(wake)
		return nil, fmt.Errorf("injector listener: %w", err)
	}
	k := &kernelRelay{sm: sm, backlog: backlog, tick: 20 * time.Millisecond, epfd: epfd, wake: wake, injLn: ln,
		byFD: map[int32]*ksession{}, sessions: map[*ksession]struct{}{}, done: make(chan struct{})}
	go k.run()
	return k, nil
}

// register adds a session to the loop; false once the relay is stopping.
func (k *kernelRelay) register(ks *ksession) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stop {
		return false
	}
	k.byFD[int32(ks.cfd)], k.byFD[int32(ks.sfd)] = ks, ks
	k.sessions[ks] = struct{}{}
	k.wg.Add(1)
	return true
}

// detach takes a finishing session out of the loop's tables (the relay still
// waits for it: wg).
func (k *kernelRelay) detach(ks *ksession) {
	k.mu.Lock()
	for _, fd := range []int32{int32(ks.cfd), int32(ks.sfd)} {
		if k.byFD[fd] == ks {
			delete(k.byFD, fd)
		}
	}
	delete(k.sessions, ks)
	k.mu.Unlock()
}

// arm (re)registers fd for one event of interest (EPOLLONESHOT: the session's
// goroutine re-arms after handling it).
func (k *kernelRelay) arm(fd int, events uint32) error {
	ev := &unix.EpollEvent{Events: events | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(fd)}
	err := unix.EpollCtl(k.epfd, unix.EPOLL_CTL_MOD, fd, ev)
	if errors.Is(err, unix.ENOENT) {
		err = unix.EpollCtl(k.epfd, unix.EPOLL_CTL_ADD, fd, ev)
	}
	return err
}

// close tells every session to end, waits for them, and stops the loop.
func (k *kernelRelay) close() {
	k.mu.Lock()
	if k.stop {
		k.mu.Unlock()
		<-k.done
		return
	}
	k.stop = true
	for ks := range k.sessions {
		ks.notify(evStop)
	}
	k.mu.Unlock()
	k.wg.Wait()
	var one [8]byte
	one[0] = 1
	unix.Write(k.wake, one[:])
	<-k.done
	k.dropInjectors()
	k.injLn.Close()
	k.sm.Close()
}

// Entries counts the sockets of sessions in the maps, TCP and unix (empty when no
// session is on): injectors kept for later sessions do not count.
func (k *kernelRelay) entries() (int, int) {
	tcp, unix := k.sm.Entries()
	k.injMu.Lock()
	tcp -= len(k.injPool)
	k.injMu.Unlock()
	return tcp, unix
}

// run waits for hang-ups through Go's poller (the epoll set is itself pollable),
// so that no thread blocks in epoll_wait holding a processor, and sweeps the
// sessions on a ticker.
func (k *kernelRelay) run() {
	defer close(k.done)
	unix.SetNonblock(k.epfd, true)
	f := os.NewFile(uintptr(k.epfd), "kernel-relay-epoll")
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	stop := make(chan struct{})
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		t := time.NewTicker(k.tick)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				k.sweep(now)
			}
		}
	}()
	events := make([]unix.EpollEvent, 128)
	for {
		n := 0
		err := rc.Read(func(uintptr) bool {
			n, _ = unix.EpollWait(k.epfd, events, 0)
			return n > 0
		})
		if err != nil {
			break
		}
		for i := 0; i < n; i++ {
			k.dispatch(events[i])
		}
		k.mu.Lock()
		stopping := k.stop && len(k.sessions) == 0
		k.mu.Unlock()
		if stopping {
			break
		}
	}
	close(stop)
	<-swept
	unix.Close(k.wake)
	f.Close()
}

// dispatch hands an epoll event to its session's goroutine.
func (k *kernelRelay) dispatch(e unix.EpollEvent) {
	if int(e.Fd) == k.wake {
		var b [8]byte
		unix.Read(k.wake, b[:])
		return
	}
	k.mu.Lock()
	ks := k.byFD[e.Fd]
	k.mu.Unlock()
	switch {
	case ks == nil:
	case int(e.Fd) == ks.sfd:
		ks.notify(evServerHup)
	case e.Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0:
		ks.notify(evClientHup)
	default:
		ks.notify(evHeld)
	}
}

// sweep looks at every session's slots: bytes handed to the proxy, backlog caps,
// and clients that stopped reading.
func (k *kernelRelay) sweep(now time.Time) {
	k.mu.Lock()
	all := make([]*ksession, 0, len(k.sessions))
	for ks := range k.sessions {
		all = append(all, ks)
	}
	k.mu.Unlock()
	k.sweepRefs(now, all)
	for _, ks := range all {
		ks.sweep(now, k.backlog)
	}
}

// sweepRefs reads, in one pass over /proc/net/tcp, the client sockets' reference
// counts that sessions need: a first count of a session once it is baseDelay
// old, and the count of a session whose redirects toward the server near their
// limit, whose limit advances when nothing of it is queued any more. A
// session's base is the lowest count seen: queued packets only add to it.
//
// The pass lists every TCP socket of the namespace, closed ones in TIME_WAIT
// included (thousands under a connect-per-query load), so first counts are read
// only for sessions older than baseDelay, and at most once per baseDelay: a
// short session never costs one.
func (k *kernelRelay) sweepRefs(now time.Time, all []*ksession) {
	var need []*ksession
	var inodes, bytes []uint64
	bases := now.Sub(k.basesAt) >= baseDelay
	for _, ks := range all {
		b := ks.sm.Slot(sockmap.ToServer).Bytes
		needBase := ks.cbase.Load() == 0 && bases && now.Sub(ks.start) >= baseDelay
		if needBase || ks.cbase.Load() != 0 && b-ks.mark > k.backlog/2 {
			need, inodes, bytes = append(need, ks), append(inodes, ks.cino), append(bytes, b)
		}
	}
	if len(need) == 0 {
		return
	}
	if bases {
		k.basesAt = now
	}
	refs, err := socketRefs(inodes...)
	if err != nil {
		return // a session ended meanwhile: the next tick asks again
	}
	for i, ks := range need {
		ks.lowerBase(refs[i])
		if bytes[i]-ks.mark > k.backlog/2 && refs[i]-int(ks.cbase.Load()) <= timerRefs {
			// What was redirected before the count was read has been sent on.
			ks.mark = bytes[i]
			ks.sm.Limit(sockmap.ToServer, ks.mark+k.backlog)
		}
	}
}

// lowerBase takes refs, a count of the client socket's references, as its base
// if it is the first or the lowest seen.
func (ks *ksession) lowerBase(refs int) {
	if b := ks.cbase.Load(); b == 0 || int64(refs) < b {
		ks.cbase.Store(int64(refs))
	}
}

// ksession is one spliced session as the loop and its goroutine see it.
type ksession struct {
	sm           *sockmap.Session
	cfd, sfd     int
	w0           uint64        // bytes written to the client socket before the splice
	wrote        atomic.Uint64 // bytes the proxy itself wrote to the client since
	sndbuf       int           // the server socket's send buffer
	inj          *injector     // nil until needed
	injected     uint64        // bytes written to the injector
	start        time.Time     // when the session was spliced
	cino         uint64        // the client socket's inode
	cbase        atomic.Int64  // the lowest reference count seen on it (see sweepRefs); 0: not read yet
	baseKnown    bool          // base[ToServer] is set (forwardInitial)
	clientHeld   bool          // the client's bytes go through the proxy for the rest of the session
	r0           uint64        // client bytes read before the splice (readPosition)
	consumed     [2]uint64     // bytes the proxy read from each direction's source
	base         [2]uint64     // of those, never seen by the program (see forwardInitial)
	writeTimeout time.Duration
	left         func() // the client has left (see relay)
	pending      atomic.Uint32
	ev           chan struct{}

	// Loop only.
	lastToClient uint64
	clientBusy   bool // bytes for the client not yet acknowledged
	lastAcked    uint64
	progressAt   time.Time
	mark         uint64 // redirected-to-server bytes known sent on to the server
}

func (ks *ksession) notify(ev uint32) {
	ks.pending.Or(ev)
	select {
	case ks.ev <- struct{}{}:
	default:
	}
}

// written returns the bytes written to the client socket so far (acknowledged or
// queued) and the acknowledged ones.
func written(fd int) (total, acked uint64, err error) {
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return 0, 0, err
	}
	outq, err := unix.IoctlGetInt(fd, unix.SIOCOUTQ)
	if err != nil {
		return 0, 0, err
	}
	return info.Bytes_acked + uint64(outq), info.Bytes_acked, nil
}

// deliveredToClient returns the redirected bytes the client socket has taken.
func (ks *ksession) deliveredToClient() (uint64, uint64, error) {
	total, acked, err := written(ks.cfd)
	if err != nil {
		return 0, 0, err
	}
	return total - ks.w0 - ks.wrote.Load(), acked, nil
}

func (ks *ksession) sweep(now time.Time, backlog uint64) {
	ts, tc := ks.sm.Slot(sockmap.ToServer), ks.sm.Slot(sockmap.ToClient)
	if ts.Passed != ts.Ack || tc.Passed != tc.Ack || ts.Flags&sockmap.FlagTerminate != 0 {
		ks.notify(evHeld)
	}
	if tc.Bytes != ks.lastToClient || ks.clientBusy {
		ks.lastToClient = tc.Bytes
		if got, acked, err := ks.deliveredToClient(); err == nil {
			total := got + ks.w0 + ks.wrote.Load()
			ks.clientBusy = got < tc.Bytes || acked < total
			if !ks.clientBusy || acked != ks.lastAcked {
				ks.lastAcked, ks.progressAt = acked, now
			} else if now.Sub(ks.progressAt) >= ks.writeTimeout {
				ks.notify(evStalled)
			}
		}
	} else {
		ks.progressAt = now
	}
}

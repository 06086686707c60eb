package proxy

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A pump moves the bytes of plaintext sessions after login, on one OS thread with
// an epoll set of its own: read from one socket, write to the other, as PgBouncer
// does. The sockets are duplicated and the Go connections closed, which takes them
// out of Go's netpoller, so a query costs its read and write system calls and no
// goroutine wake-ups. Sessions over TLS stay with the goroutine relay.
//
// A pump is safe for concurrent use; its loop is the only code that touches a
// session after add.
type pump struct {
	raw   bool // make the loop's system calls raw (see pump_sys.go)
	epfd  int
	wake  int // eventfd: stop interrupts epoll_wait
	mu    sync.Mutex
	socks map[int32]*pumpSession
	stop  bool
	done  chan struct{}

	scratch [512]byte     // the loop reads reset answers into it
	later   afterLoop     // what ended sessions and resets leave to do (pump_later.go)
	kick    chan struct{} // wakes drainer to run it
	drained chan struct{} // closed when drainer has returned

	beforeEpollAdd func() // tests only: runs in add, under mu, just before the epoll registration
}

// pumpSession is one session: the client's and the server's sockets, and what each
// direction still has to write when its receiver is slow.
type pumpSession struct {
	client, server int
	toServer       pumpDir // client -> server
	toClient       pumpDir // server -> client
	writeTimeout   time.Duration
	track          *sessionTrack    // set when the server session may be reused
	result         chan pumpResult  // receives once, when the session has ended (ended nil)
	ended          func(pumpResult) // told once how the session ended, outside the loop (see afterLoop)
	unwatched      [2]bool          // client, server: already out of the epoll set
	reset          *pumpReset       // run when the client leaves the server idle; nil: hand it back as it is
	resetting      bool             // the client has left and the reset's answer is awaited
	keepClient     bool             // hand the client's socket back when it ends the session with Terminate, idle
}

// pumpResult is how a session ended.
type pumpResult struct {
	stalled bool // the client was cut off for not reading
	server  int  // the server's socket, left open because the session is idle and reusable; -1 if closed
	// resetting: the client left the server idle and the pump is resetting it;
	// the reset's then is told how it ended.
	resetting bool
	// client is the client's socket, left open for its next session (keepClient);
	// -1 if closed.
	client int
}

// How a session ended, as end is told.
type endCause int

const (
	endClient  endCause = iota // the client closed, sent Terminate, or could not be written
	endServer                  // the server closed or could not be written
	endStalled                 // the client stopped reading for writeTimeout
	endStop                    // the pump is closing
)

type pumpDir struct {
	bufp   *[]byte // from relayBufs, returned when the session ends
	buf    []byte
	off, n int       // pending bytes are buf[off:n]
	since  time.Time // when the pending bytes started waiting
	eof    bool      // the source ended: write what is pending, then end
}

func (d *pumpDir) pending() bool { return d.off < d.n }

func newPumpDir() pumpDir {
	bp := getRelayBuf()
	return pumpDir{bufp: bp, buf: *bp}
}

// release returns the buffer; the session has ended and never reads it again.
func (d *pumpDir) release() {
	if d.bufp != nil {
		putRelayBuf(d.bufp)
		d.bufp, d.buf, d.off, d.n = nil, nil, 0, 0
	}
}

// errPumpStopped: a session came to a pump that is closing.
var errPumpStopped = errors.New("the relay is shutting down")

// newPump starts a pump's loop.
func newPump(raw bool) (*pump, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)}); err != nil {
		unix.Close(epfd)
		unix.Close(wake)
		return nil, err
	}
	p := &pump{raw: raw, epfd: epfd, wake: wake, socks: map[int32]*pumpSession{}, done: make(chan struct{}),
		kick: make(chan struct{}, 1), drained: make(chan struct{})}
	go p.run()
	go p.drainer()
	return p, nil
}

// dupSocket returns a duplicate of c's socket (close-on-exec, non-blocking).
func dupSocket(c net.Conn) (int, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1, errors.New("not a socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := raw.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	return fd, derr
}

// add hands client and server over to the pump and closes the Go connections. The
// returned channel receives once, when the session has ended. With track set, the
// pump follows the protocol (see sessionTrack): the client's Terminate is not passed
// on, and a server session the client leaves idle is handed back open.
func (p *pump) add(client, server net.Conn, writeTimeout time.Duration, track *sessionTrack) (<-chan pumpResult, error) {
	return p.addSession(client, &serverConn{Conn: server, fd: -1}, writeTimeout, track, nil, false, nil)
}

// addSession is add for a server session, whose socket may already be out of Go's
// hands (detached, as the pump handed it back). With reset set, a server session
// the client leaves idle is reset by the pump, which then hands it to the reset's
// then (see pumpResult.resetting). With keepClient, a client that ends the
// session with Terminate while it is idle is handed back too
// (pumpResult.client). The session's sockets belong to the pump from here on.
//
// With ended set, nothing waits for the session: ended is told how it ended
// instead of the returned channel (which is nil), outside the loop and not at
// once (see afterLoop), so that a session's end wakes no goroutine of its own.
func (p *pump) addSession(client net.Conn, sc *serverConn, writeTimeout time.Duration, track *sessionTrack, reset *pumpReset, keepClient bool, ended func(pumpResult)) (<-chan pumpResult, error) {
	cfd, err := dupSocket(client)
	if err != nil {
		return nil, err
	}
	sfd := sc.fd
	if sc.Conn != nil {
		if sfd, err = dupSocket(sc.Conn); err != nil {
			unix.Close(cfd)
			return nil, err
		}
		sc.Conn.Close()
	}
	sc.Conn, sc.fd = nil, -1
	client.Close()
	s := &pumpSession{client: cfd, server: sfd, writeTimeout: writeTimeout, track: track, reset: reset, ended: ended,
		toServer: newPumpDir(), toClient: newPumpDir(), keepClient: keepClient && track != nil}
	if ended == nil {
		s.result = make(chan pumpResult, 1)
	}
	// Under the lock, so that the loop cannot end the session (closing its
	// descriptors) or close the epoll set while the session is half registered.
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop {
		unix.Close(cfd)
		unix.Close(sfd)
		if ended != nil {
			return nil, errPumpStopped
		}
		s.result <- pumpResult{server: -1, client: -1}
		return s.result, nil
	}
	if p.beforeEpollAdd != nil {
		p.beforeEpollAdd()
	}
	ev := unix.EPOLLIN | unix.EPOLLRDHUP
	for i, fd := range []int{cfd, sfd} {
		if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: uint32(ev), Fd: int32(fd)}); err != nil {
			if i > 0 {
				unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, cfd, nil)
			}
			unix.Close(cfd)
			unix.Close(sfd)
			return nil, fmt.Errorf("epoll add: %w", err)
		}
	}
	p.socks[int32(cfd)], p.socks[int32(sfd)] = s, s
	return s.result, nil
}

// close ends every session and the loop, and waits for it.
func (p *pump) close() {
	p.mu.Lock()
	p.stop = true
	p.mu.Unlock()
	var one [8]byte
	one[0] = 1
	unix.Write(p.wake, one[:])
	<-p.done
	unix.Close(p.wake) // here, so that the write above never finds its number reused
	close(p.kick)
	<-p.drained
}

// run is the loop. It owns an OS thread so that its blocking epoll_wait never parks
// a goroutine another one has to wake.
func (p *pump) run() {
	runtime.LockOSThread()
	defer close(p.done)
	events := make([]unix.EpollEvent, 128)
	lastSweep := time.Now()
	for {
		n, err := p.wait(events)
		if err != nil && !errors.Is(err, unix.EINTR) {
			break
		}
		for i := 0; i < n; i++ {
			fd := events[i].Fd
			if int(fd) == p.wake {
				continue
			}
			p.mu.Lock()
			s := p.socks[fd]
			p.mu.Unlock()
			switch {
			case s == nil:
			case s.resetting:
				p.readReset(s)
			default:
				p.serve(s, int(fd), events[i].Events)
			}
		}
		p.mu.Lock()
		stopping := p.stop
		p.mu.Unlock()
		if stopping {
			break
		}
		// An idle loop sweeps at once, a busy one every second; not at every
		// short wait for queued work.
		now := time.Now()
		if since := now.Sub(lastSweep); since >= time.Second || n == 0 && since >= 100*time.Millisecond {
			lastSweep = now
			p.sweep(now)
		}
		if p.later.due(now) {
			p.kickDrainer()
		}
	}
	p.mu.Lock()
	p.stop = true // when the wait failed: add refuses sessions from now on
	all := map[*pumpSession]bool{}
	for _, s := range p.socks {
		all[s] = true
	}
	p.mu.Unlock()
	for s := range all {
		p.end(s, endStop)
	}
	p.kickDrainer()
	unix.Close(p.epfd)
}

// sweep cuts off sessions whose client has not taken its bytes for writeTimeout.
func (p *pump) sweep(now time.Time) {
	p.mu.Lock()
	var stalled, slowReset []*pumpSession
	for fd, s := range p.socks {
		switch {
		case s.resetting:
			if now.After(s.reset.deadline) {
				slowReset = append(slowReset, s)
			}
		case int(fd) == s.client && s.toClient.pending() && now.Sub(s.toClient.since) >= s.writeTimeout:
			stalled = append(stalled, s)
		}
	}
	p.mu.Unlock()
	for _, s := range slowReset {
		p.finishReset(s, false)
	}
	for _, s := range stalled {
		// Reset, do not linger: what the client did not read is thrown away.
		unix.SetsockoptLinger(s.client, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
		p.end(s, endStalled)
	}
}

// serve handles readiness of fd, one of s's sockets.
func (p *pump) serve(s *pumpSession, fd int, events uint32) {
	src, dst, dir := s.client, s.server, &s.toServer
	back := &s.toClient // the direction that writes to fd
	if fd == s.server {
		src, dst, dir, back = s.server, s.client, &s.toClient, &s.toServer
	}
	if events&unix.EPOLLOUT != 0 && back.pending() {
		if !p.flush(s, back, fd) {
			return
		}
	}
	if events&(unix.EPOLLHUP|unix.EPOLLERR) != 0 && dir.pending() {
		// src is gone while its last bytes wait for dst: stop watching src (its
		// hang-up would be reported again and again) and end once they are written.
		dir.eof = true
		p.unwatch(s, src)
		return
	}
	if events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 && !dir.pending() && !dir.eof {
		p.move(s, src, dst, dir)
	}
}

// causeAt says how a session ended when fd, one of its sockets, failed or closed.
func causeAt(s *pumpSession, fd int) endCause {
	if fd == s.client {
		return endClient
	}
	return endServer
}

// move reads what src has and writes it to dst; what dst does not take waits, and
// src is not read again until it is written.
func (p *pump) move(s *pumpSession, src, dst int, d *pumpDir) {
	for {
		n, err := p.read(src, d.buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return
		case err != nil || n == 0:
			p.end(s, causeAt(s, src))
			return
		}
		if s.track != nil {
			if src == s.client {
				if fwd := s.track.fromClient(d.buf[:n]); s.track.terminated {
					// The Terminate stays here: write what came before it, then end.
					n, d.eof = fwd, true
					p.unwatch(s, src)
				}
			} else {
				s.track.fromServer(d.buf[:n])
			}
		}
		d.off, d.n = 0, n
		if !p.flush(s, d, dst) {
			return
		}
		if d.pending() {
			return
		}
		if n < len(d.buf) {
			return // drained; level-triggered epoll reports more
		}
	}
}

// flush writes d's pending bytes to dst. It returns false if the session ended.
// While bytes are pending, dst is watched for writability and the source is not.
func (p *pump) flush(s *pumpSession, d *pumpDir, dst int) bool {
	wasPending := !d.since.IsZero()
	for d.pending() {
		n, err := p.write(dst, d.buf[d.off:d.n])
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			if !wasPending {
				d.since = time.Now()
				p.watch(s)
			}
			return true
		}
		if err != nil {
			p.end(s, causeAt(s, dst))
			return false
		}
		d.off += n
	}
	d.off, d.n = 0, 0
	if d.eof {
		// The source of these bytes has ended.
		p.end(s, causeAt(s, otherSide(s, dst)))
		return false
	}
	if wasPending {
		d.since = time.Time{}
		p.watch(s)
	}
	return true
}

// watch sets each socket's interest: readable unless its outgoing bytes wait,
// writable while bytes for it wait.
func (p *pump) watch(s *pumpSession) {
	for i, x := range []struct {
		fd      int
		out, in *pumpDir // out: from this socket; in: to this socket
	}{{s.client, &s.toServer, &s.toClient}, {s.server, &s.toClient, &s.toServer}} {
		if s.unwatched[i] {
			continue // its source ended; only the other side still waits
		}
		var ev uint32
		if !x.out.pending() {
			ev |= unix.EPOLLIN | unix.EPOLLRDHUP
		}
		if x.in.pending() {
			ev |= unix.EPOLLOUT
		}
		unix.EpollCtl(p.epfd, unix.EPOLL_CTL_MOD, x.fd, &unix.EpollEvent{Events: ev, Fd: int32(x.fd)})
	}
}

// unwatch takes fd, one of s's sockets, out of the epoll set, once: each socket
// leaves the set explicitly before it is closed or handed back, because a forked
// child holding a copy of it would keep its registration alive.
func (p *pump) unwatch(s *pumpSession, fd int) {
	i := 0
	if fd == s.server {
		i = 1
	}
	if !s.unwatched[i] {
		s.unwatched[i] = true
		unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	}
}

func otherSide(s *pumpSession, fd int) int {
	if fd == s.client {
		return s.server
	}
	return s.client
}

// end removes the session, closes its sockets and reports how it ended; a server
// session the client left idle stays open when the session is tracked, and is
// reset first when the session has a reset. Only the loop calls it; a session ends
// once (a session being reset ends with its reset).
func (p *pump) end(s *pumpSession, cause endCause) {
	if s.resetting {
		p.finishReset(s, false)
		return
	}
	p.mu.Lock()
	live := p.socks[int32(s.client)] == s
	delete(p.socks, int32(s.client))
	delete(p.socks, int32(s.server))
	p.mu.Unlock()
	if !live {
		return
	}
	p.unwatch(s, s.client)
	switch {
	case cause == endStop:
		p.sayShuttingDown(s)
	case cause == endServer && !s.toClient.pending() && s.track.serverLost():
		p.write(s.client, serverLostNotice())
	}
	reusable := cause == endClient && s.track != nil && !s.toServer.pending() && s.track.idle()
	r := pumpResult{stalled: cause == endStalled, server: -1, client: -1}
	if reusable && s.keepClient && s.track.terminated {
		r.client = s.client
	} else {
		unix.Close(s.client)
	}
	readOff := s.toClient.pending() // watch took reading off the server
	s.toServer.release()
	s.toClient.release()
	switch {
	case reusable && s.reset != nil:
		if r.resetting = p.startReset(s, readOff); !r.resetting {
			p.unwatch(s, s.server)
			unix.Close(s.server)
		}
	case reusable:
		p.unwatch(s, s.server)
		r.server = s.server
	default:
		p.unwatch(s, s.server)
		unix.Close(s.server)
	}
	if s.ended != nil {
		p.later.add(func() { s.ended(r) })
		return
	}
	s.result <- r
}

// fdConn makes a Go connection of a socket the pump handed back, taking ownership
// of fd.
func fdConn(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "server")
	defer f.Close() // FileConn works on a duplicate
	return net.FileConn(f)
}

func (p *pump) wait(events []unix.EpollEvent) (int, error) {
	// A short timeout bounds how long a raw wait holds its P without a call the
	// scheduler sees.
	msec := 1000
	if p.raw {
		msec = 20
	}
	if p.later.waiting() {
		msec = int(laterDelay / time.Millisecond)
	}
	if p.raw {
		return rawEpollWait(p.epfd, events, msec)
	}
	return unix.EpollWait(p.epfd, events, msec)
}

func (p *pump) read(fd int, b []byte) (int, error) {
	if p.raw {
		return rawRead(fd, b)
	}
	return unix.Read(fd, b)
}

func (p *pump) write(fd int, b []byte) (int, error) {
	if p.raw {
		return rawWrite(fd, b)
	}
	return unix.Write(fd, b)
}

package proxy

import (
	"errors"
	"net"
	"os"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/proxy/sockmap"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Bounds on waiting for bytes the kernel still has queued.
const (
	settleTime   = 2 * time.Millisecond // for a program already running to finish
	serverDrain  = 5 * time.Second      // for the server to take what was redirected to it
	pauseTimeout = time.Second          // a backlog that takes longer to drain is looked at again at the next tick
)

// relay splices client and backend and carries the session until it ends. The
// Go connections are closed (their sockets leave Go's poller, which would wake on
// every packet); the result's Backend is a new connection on the same server
// socket when the session ended with it usable. left is called once the client has
// left and its last bytes went on to the server, before the server session is
// looked at (see finish), on every spliced session (one that ends before the
// splice leaves that to the caller, as the pumps do). An error means the session
// could not be spliced and both connections are untouched (nothing was read from
// either).
func (k *kernelRelay) relay(client *net.TCPConn, backend *net.UnixConn, writeTimeout time.Duration,
	stats *RelayStats, left func(), log *zap.Logger) (RelayResult, error) {
	cfd, err := dupSocket(client)
	if err != nil {
		return RelayResult{}, err
	}
	sfd, err := dupSocket(backend)
	if err != nil {
		unix.Close(cfd)
		return RelayResult{}, err
	}
	now := time.Now()
	ks := &ksession{cfd: cfd, sfd: sfd, writeTimeout: writeTimeout, ev: make(chan struct{}, 1),
		progressAt: now, start: now, left: left}
	if ks.sndbuf, err = unix.GetsockoptInt(sfd, unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil {
		ks.w0, _, err = written(cfd)
	}
	if err == nil {
		ks.r0, err = readPosition(cfd)
	}
	if err == nil {
		ks.cino, err = socketInode(cfd)
	}
	if err == nil {
		if ahead := k.readAhead(ks); ahead != nil {
			return k.endUnspliced(ks, client, backend, toClientEnd(ahead), stats, log), nil
		}
		ks.sm, err = k.sm.Add(cfd, sfd)
	}
	if err == nil && !k.register(ks) {
		ks.sm.Remove()
		err = errKernelRelayStopped
	}
	if err != nil && ks.consumed[sockmap.ToClient] > 0 {
		// Server bytes went on already, so another relay would start inside a
		// message: the session ends here.
		log.Warn("kernel relay: splice failed after the server's first bytes went on; session ended", zap.Error(err))
		return k.endUnspliced(ks, client, backend, EndServerClosed, stats, log), nil
	}
	if err != nil {
		unix.Close(cfd)
		unix.Close(sfd)
		return RelayResult{}, err
	}
	client.Close()
	backend.Close()
	stats.start(RelayKernel)
	// Toward the client no cap: a packet the server sent stays charged to the
	// server's socket until the kernel has sent it on, so a client that does not
	// read stops the server at its socket's send buffer, as on any socket. A cap
	// would also hand the server's bytes to the proxy mid-session, and reading the
	// server's socket then can take a packet the program has not seen yet (a unix
	// socket's read falls back to its receive queue while the handed bytes wait
	// for a kernel worker), out of order.
	ks.sm.Limit(sockmap.ToServer, k.backlog)
	end := k.carry(ks, stats)
	stats.stop(RelayKernel)
	res := k.finish(ks, end, log)
	k.wg.Done()
	return res, nil
}

// carry runs the session until it ends.
func (k *kernelRelay) carry(ks *ksession, stats *RelayStats) RelayEnd {
	unix.EpollCtl(k.epfd, unix.EPOLL_CTL_ADD, ks.sfd, &unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(ks.sfd)})
	// Both directions start held: what either side sent before the splice, and
	// anything it sends until that is forwarded, is handed to the proxy, which
	// writes it on directly (nothing was redirected yet, so nothing can be
	// overtaken). The server's side goes first, while client bytes are still held:
	// nothing is queued for the server's socket then, so what the program hands
	// over is readable at once.
	if err := k.forwardInitial(ks, sockmap.ToClient); err != nil {
		return toClientEnd(err)
	}
	if err := k.forwardInitial(ks, sockmap.ToServer); err != nil {
		return ks.clientEnd()
	}
	// From here on a direction redirects once the proxy has forwarded everything
	// it was handed (the program compares Passed with Ack): bytes handed over
	// between the checks above and these lines are forwarded by forwardHeld.
	ks.sm.Hold(sockmap.ToServer, false)
	ks.sm.Hold(sockmap.ToClient, false)
	for _, d := range []sockmap.Dir{sockmap.ToClient, sockmap.ToServer} {
		if st := ks.sm.Slot(d); st.Passed != st.Ack {
			if err := k.forwardHeld(ks, d); err != nil {
				if d == sockmap.ToServer {
					return ks.clientEnd()
				}
				return toClientEnd(err)
			}
		}
	}
	k.arm(ks.cfd, 0)
	for range ks.ev {
		ev := ks.pending.Swap(0)
		ts := ks.sm.Slot(sockmap.ToServer)
		switch {
		case ev&evStop != 0:
			return EndShutdown
		case ev&evStalled != 0:
			return EndStalled
		case ts.Flags&sockmap.FlagTerminate != 0:
			return EndTerminate
		case ev&(evServerHup|evBroken) != 0:
			return EndServerClosed
		case ev&evClientHup != 0:
			return EndClientClosed
		}
		for _, d := range []sockmap.Dir{sockmap.ToServer, sockmap.ToClient} {
			if st := ks.sm.Slot(d); st.Passed != st.Ack && st.Flags&sockmap.FlagTerminate == 0 {
				k.unpause(ks, d, stats)
			}
		}
		// The client's socket is watched once (EPOLLONESHOT): again for its
		// hang-up, and for its next packet while every packet comes to the proxy.
		if ks.clientHeld {
			k.arm(ks.cfd, unix.EPOLLIN)
		} else {
			k.arm(ks.cfd, 0)
		}
	}
	return EndShutdown
}

// clientEnd is how a session ends whose client stopped sending: with Terminate
// if the program saw one (the proxy forwarded everything before it), else
// closed.
func (ks *ksession) clientEnd() RelayEnd {
	if ks.sm.Slot(sockmap.ToServer).Flags&sockmap.FlagTerminate != 0 {
		return EndTerminate
	}
	return EndClientClosed
}

// unpause forwards what direction d handed to the proxy (it passed the backlog
// cap, or arrived while handed bytes were unacknowledged). Toward the client, and
// toward a server for which nothing was ever queued, it waits until what was
// redirected before has been taken, writes the bytes on directly and lets d
// redirect again; meanwhile the bytes wait in the source socket, whose receive
// window closes, holding the sender back as any slow receiver does. A client
// whose bytes must follow a queue for the server stays with the proxy for the
// rest of the session (relayClientHeld). False: not drained yet; the loop asks
// again at its next tick.
func (k *kernelRelay) unpause(ks *ksession, d sockmap.Dir, stats *RelayStats) bool {
	if d == sockmap.ToServer && (ks.clientHeld || ks.queuedEver()) {
		return k.relayClientHeld(ks, stats)
	}
	if d == sockmap.ToClient && !k.drained(ks, time.Now().Add(pauseTimeout)) {
		return false
	}
	stats.paused()
	if err := k.forwardHeld(ks, d); err != nil {
		ks.forwardFailed(err)
	}
	return true
}

// errForward: bytes read from one side could not be written to the other.
var errForward = errors.New("forward")

// forwardFailed ends the session after a forward failed. A failed read is its
// side hanging up, which the loop sees; a failed write leaves a hole in the
// stream, so the session ends as if the server had closed, and its server
// connection is closed, never reused.
func (ks *ksession) forwardFailed(err error) {
	if errors.Is(err, errForward) {
		ks.notify(evBroken)
	}
}

// drained waits until what was redirected to the client has reached its socket,
// or the deadline.
func (k *kernelRelay) drained(ks *ksession, deadline time.Time) bool {
	time.Sleep(settleTime)
	return waitFor(deadline, time.Millisecond, func() bool {
		got, _, err := ks.deliveredToClient()
		return err != nil || got >= ks.sm.Slot(sockmap.ToClient).Bytes
	})
}

// forwardHeld reads what direction d handed to the proxy and writes it on, then
// acknowledges it so that d redirects again (unless held). The kernel may still
// be moving handed bytes to the socket (under memory pressure it queues them for
// a worker): it acknowledges only bytes it read, and waits until every handed
// byte was. It stops at EOF.
func (k *kernelRelay) forwardHeld(ks *ksession, d sockmap.Dir) error {
	deadline := time.Now().Add(ks.writeTimeout)
	for {
		before := ks.consumed[d]
		if _, err := k.readSource(ks, d, 0); err != nil {
			return err
		}
		if err := k.settle(ks); err != nil {
			return err
		}
		acked := ks.consumed[d] - ks.base[d]
		ks.sm.Ack(d, acked)
		if ks.sm.Slot(d).Passed == acked {
			return nil
		}
		if ks.consumed[d] == before {
			if time.Now().After(deadline) {
				return errors.New("handed bytes did not arrive")
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
}

// send writes b on in direction d: to the client directly (what was redirected
// to it has been written to its socket), to the server directly while nothing was
// ever queued for it, else through the injector, behind what the kernel queued.
func (k *kernelRelay) send(ks *ksession, d sockmap.Dir, b []byte) error {
	if d == sockmap.ToClient {
		if err := writeAll(ks.cfd, b, ks.writeTimeout); err != nil {
			return err
		}
		ks.wrote.Add(uint64(len(b)))
		return nil
	}
	if !ks.queuedEver() {
		return writeAll(ks.sfd, b, ks.writeTimeout)
	}
	if err := k.injector(ks); err != nil {
		return err
	}
	if err := writeAll(ks.inj.w, b, ks.writeTimeout); err != nil {
		return err
	}
	ks.injected += uint64(len(b))
	return nil
}

// settle waits until every injected byte has joined the server's queue, so that
// client bytes redirected after an acknowledgement come after them.
func (k *kernelRelay) settle(ks *ksession) error {
	if ks.injected == 0 {
		return nil
	}
	if !waitFor(time.Now().Add(ks.writeTimeout), 100*time.Microsecond, func() bool {
		return ks.sm.Slot(sockmap.Inject).Bytes >= ks.injected
	}) {
		return errors.New("injected bytes did not reach the server's queue")
	}
	return nil
}

// injector gives the session an injector on first use.
func (k *kernelRelay) injector(ks *ksession) error {
	if ks.inj != nil {
		return nil
	}
	in, err := k.takeInjector()
	if err != nil {
		return err
	}
	if err := ks.sm.UseInjector(in.sm); err != nil {
		k.dropInjector(in)
		return err
	}
	ks.inj = in
	return nil
}

var errEOF = errors.New("end of stream")

// writeAll writes b to the non-blocking socket fd, waiting for room up to timeout.
func writeAll(fd int, b []byte, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			ms := int(time.Until(deadline) / time.Millisecond)
			if ms <= 0 {
				return os.ErrDeadlineExceeded
			}
			unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}, min(ms, 100))
			continue
		case err != nil:
			return err
		}
		b = b[n:]
	}
	return nil
}

// finish takes the session out of the maps without losing what the kernel still
// queues, and closes the client's socket. The server's is handed back open when
// the session ended with it usable.
func (k *kernelRelay) finish(ks *ksession, end RelayEnd, log *zap.Logger) RelayResult {
	// Out of the loop's tables first: once a descriptor below closes, its number
	// may go to a new session.
	k.detach(ks)
	// Out of the epoll set before any of its descriptors closes: the server socket
	// lives on in the caller's hands under another descriptor.
	unix.EpollCtl(k.epfd, unix.EPOLL_CTL_DEL, ks.cfd, nil)
	unix.EpollCtl(k.epfd, unix.EPOLL_CTL_DEL, ks.sfd, nil)
	ks.sm.Hold(sockmap.ToServer, true)
	ks.sm.Hold(sockmap.ToClient, true)
	res := RelayResult{End: end, Relay: RelayKernel}
	switch end {
	case EndTerminate, EndClientClosed:
		// The client's last messages reach the server; its Terminate does not.
		k.forwardClientTail(ks, log)
		// The client has left: the branch's session ends now, as on the pumps, and
		// does not wait for the server's answer to the idle probe (a round trip to
		// a server that may be slow to answer) or for its queue to drain.
		ks.left()
		if end == EndTerminate {
			res.Idle = k.probeIdle(ks)
		}
		if !res.Idle && !k.serverDrained(ks, time.Now().Add(serverDrain)) {
			// An answered probe went behind everything queued for the server, so
			// the queue is empty; otherwise it had to drain.
			log.Debug("kernel relay: the client's last bytes may not have reached the server")
		}
	case EndServerClosed:
		// The server's last words (an error saying why) reach the client.
		k.drained(ks, time.Now().Add(ks.writeTimeout))
		k.forwardHeld(ks, sockmap.ToClient)
	}
	// An injector whose bytes all reached the server's queue can serve the next
	// session.
	clean := ks.inj != nil && ks.sm.Slot(sockmap.Inject).Bytes == ks.injected
	if err := ks.sm.Remove(); err != nil {
		log.Warn("kernel relay: remove session from maps", zap.Error(err))
	}
	if ks.inj != nil {
		k.releaseInjector(ks.inj, clean)
		ks.inj = nil
	}
	if end == EndStalled {
		unix.SetsockoptLinger(ks.cfd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	}
	unix.Close(ks.cfd)
	if end == EndServerClosed || end == EndShutdown {
		unix.Close(ks.sfd)
		return res
	}
	f := os.NewFile(uintptr(ks.sfd), "branch-server")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		log.Warn("kernel relay: hand back the server connection", zap.Error(err))
		return res
	}
	res.Backend = c
	return res
}

// forwardClientTail forwards what the client sent that was handed to the proxy
// at the end, all but a final Terminate.
func (k *kernelRelay) forwardClientTail(ks *ksession, log *zap.Logger) {
	var tail []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(ks.cfd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			break
		}
		tail = append(tail, buf[:n]...)
	}
	if t := len(tail) - 5; t >= 0 && tail[t] == 'X' && string(tail[t+1:]) == "\x00\x00\x00\x04" {
		tail = tail[:t]
	}
	if len(tail) > 0 {
		err := k.send(ks, sockmap.ToServer, tail)
		if err == nil {
			err = k.settle(ks)
		}
		if err != nil {
			log.Debug("kernel relay: forward the client's last bytes", zap.Error(err))
		}
	}
}

// syncMsg is a Sync message: outside an extended query it only makes the server
// say ReadyForQuery, with its transaction status.
var syncMsg = []byte{'S', 0, 0, 0, 4}

// probeIdle tells whether the server session is idle outside a transaction with
// nothing in flight, once the client has terminated: the client was between
// queries, and a Sync sent behind everything it sent is answered by exactly one
// ReadyForQuery saying idle, with nothing before it. Server bytes are held, so
// the answer comes to the proxy.
func (k *kernelRelay) probeIdle(ks *ksession) bool {
	st := ks.sm.Slot(sockmap.ToServer)
	if !st.Boundary || st.Unsynced || st.Flags&sockmap.FlagLost != 0 {
		return false
	}
	handed := ks.sm.Slot(sockmap.ToClient).Passed
	// Client bytes are held: nothing can overtake the Sync, and its answer shows
	// that it, and everything queued before it, reached the server.
	if err := k.send(ks, sockmap.ToServer, syncMsg); err != nil {
		return false
	}
	want := []byte{'Z', 0, 0, 0, 5, 'I'}
	var got []byte
	buf := make([]byte, 64)
	deadline := time.Now().Add(time.Second)
	for len(got) < len(want) {
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms <= 0 {
			return false
		}
		unix.Poll([]unix.PollFd{{Fd: int32(ks.sfd), Events: unix.POLLIN}}, min(ms, 10))
		n, err := unix.Read(ks.sfd, buf)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return false
		}
		got = append(got, buf[:n]...)
	}
	if string(got) != string(want) {
		return false
	}
	// Nothing may have come with it: the server's direction is held, so every byte
	// it sent was handed over and counted. A byte it sends later stays in the
	// socket for whoever reads the connection next, as on the pump.
	return ks.sm.Slot(sockmap.ToClient).Passed-handed == uint64(len(want))
}

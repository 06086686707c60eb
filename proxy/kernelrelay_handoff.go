package proxy

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/proxy/sockmap"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// The handoff into the maps. Until a socket joins a map its bytes wait in its
// receive queue; once it has joined, the kernel runs the program on every byte
// that arrives (with the receive queue: TCP hands the program everything queued,
// a unix socket the oldest packet, at each arrival). A byte the client or the
// server sent just before the splice can so stay in the receive queue, never seen
// by the program, and the proxy reads it there directly. While a direction is held
// every byte the program sees is handed to the proxy (counted in Passed), and the
// socket yields the unseen bytes and the handed ones in the order they were sent;
// what is unknown is how many of the bytes read were handed over. forwardInitial
// finds out, so that Ack counts handed bytes exactly and the program redirects
// only once every handed byte has been forwarded.

// readPosition returns how many bytes of the TCP stream on fd have been read: the
// bytes received less those still queued, taken when no byte arrived between.
func readPosition(fd int) (uint64, error) {
	for range 100 {
		a, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return 0, fmt.Errorf("tcp info: %w", err)
		}
		inq, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
		if err != nil {
			return 0, fmt.Errorf("queued bytes: %w", err)
		}
		b, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return 0, fmt.Errorf("tcp info: %w", err)
		}
		if a.Bytes_received == b.Bytes_received && uint64(inq) <= a.Bytes_received {
			return a.Bytes_received - uint64(inq), nil
		}
	}
	return 0, errors.New("client bytes keep arriving")
}

// readAhead forwards what the server sent before the splice, before its socket
// joins the map. Once it has joined, each packet that arrives makes the kernel take
// the oldest one still queued and hand it over after releasing the socket, so a read
// in between can return a packet queued behind it (out of order), or the rest of
// one a read took part of (twice). Read ahead, the queue is empty at the splice
// but for what arrives in between: a server answers nothing until the held client
// bytes reach it, and only its own notices and notifications can come. An error
// ends the session before the splice (toClientEnd).
func (k *kernelRelay) readAhead(ks *ksession) error {
	_, err := k.readSource(ks, sockmap.ToClient, 0)
	return err
}

// toClientEnd says how a session ended when moving the server's bytes to the
// client failed with err: the client did not take them within the write timeout
// (cut off, as on the pumps), or could not take them, or the server closed (its
// last words forwarded) or broke.
func toClientEnd(err error) RelayEnd {
	switch {
	case errors.Is(err, errForward) && errors.Is(err, os.ErrDeadlineExceeded):
		return EndStalled
	case errors.Is(err, errForward):
		return EndClientClosed
	default:
		return EndServerClosed
	}
}

// endUnspliced ends a session that never joined the maps: both sockets close (the
// server's may be anywhere in its stream), the client's by a reset when it
// stalled, as finish does. Otherwise what the client sent for the server is read
// and dropped first: closing a socket with unread bytes resets the connection,
// which can cost the client the server's last words still on their way.
func (k *kernelRelay) endUnspliced(ks *ksession, client *net.TCPConn, backend *net.UnixConn, end RelayEnd,
	stats *RelayStats, log *zap.Logger) RelayResult {
	if end == EndStalled {
		unix.SetsockoptLinger(ks.cfd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	} else {
		var scratch [16 << 10]byte
		for range 64 { // at most 1 MiB: a client that keeps sending gets its reset
			if n, err := unix.Read(ks.cfd, scratch[:]); n <= 0 || err != nil {
				break
			}
		}
	}
	unix.Close(ks.cfd)
	unix.Close(ks.sfd)
	client.Close()
	backend.Close()
	stats.start(RelayKernel)
	stats.stop(RelayKernel)
	log.Debug("kernel relay: session ended before the splice", zap.Stringer("end", end))
	return RelayResult{End: end, Relay: RelayKernel}
}

// forwardInitial forwards what held direction d's source had before and since the
// splice, writing it on directly, until the source is quiet, and sets Ack to the
// handed bytes among those read (the rest were never seen by the program).
//
// Toward the server the count is exact: once the bytes read equal the bytes the
// client's socket received since the splice, every byte the program counted has
// been read. Toward the client the unix socket counts nothing received; the
// source is taken as quiet when a read finds nothing, its receive queue is empty
// and Passed did not move across a second read. The server has just answered
// with ReadyForQuery, so it sends nothing here unless a notification races the
// splice.
func (k *kernelRelay) forwardInitial(ks *ksession, d sockmap.Dir) error {
	deadline := time.Now().Add(ks.writeTimeout)
	for {
		if _, err := k.readSource(ks, d, 0); err != nil {
			return err
		}
		passed := ks.sm.Slot(d).Passed
		quiet := false
		if d == sockmap.ToServer {
			pos, err := readPosition(ks.cfd)
			if err != nil {
				return err
			}
			quiet = pos-ks.r0 == ks.consumed[d]
		} else if n, err := unix.IoctlGetInt(ks.sfd, unix.SIOCINQ); err != nil {
			return fmt.Errorf("queued server bytes: %w", err)
		} else if n == 0 {
			before := ks.consumed[d]
			if _, err := k.readSource(ks, d, 0); err != nil {
				return err
			}
			quiet = ks.consumed[d] == before && ks.sm.Slot(d).Passed == passed
		}
		if quiet && passed <= ks.consumed[d] {
			ks.base[d] = ks.consumed[d] - passed
			ks.baseKnown = ks.baseKnown || d == sockmap.ToServer
			ks.sm.Ack(d, passed)
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the splice did not settle")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// handoffBufs hold readSource's buffers. A read must take a whole skb off the
// server's unix socket: the kernel's verdict path takes the skbs left on the
// socket whole, so the part of one a short read took would reach the client a
// second time (seen as 8 MiB streamed at the splice arriving with tens of KiB
// more). A unix stream skb is at most half the sender's send buffer (about 104
// KiB by default); 1 MiB covers a send buffer raised eightfold.
var handoffBufs = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// readSource reads direction d's source until it has nothing more, or at least
// limit bytes (0: no limit), and writes what it read on. It stops at EOF.
func (k *kernelRelay) readSource(ks *ksession, d sockmap.Dir, limit int) (int, error) {
	src := ks.cfd
	if d == sockmap.ToClient {
		src = ks.sfd
	}
	bp := handoffBufs.Get().(*[]byte)
	defer handoffBufs.Put(bp)
	buf := *bp
	read := 0
	for limit <= 0 || read < limit {
		n, err := unix.Read(src, buf)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return read, nil
		case err != nil:
			return read, err
		case n == 0:
			return read, errEOF
		}
		read += n
		out := buf[:n]
		if d == sockmap.ToServer {
			out = ks.beforeTerminate(out)
		}
		ks.consumed[d] += uint64(n)
		if err := k.send(ks, d, out); err != nil {
			return read, fmt.Errorf("%w: %w", errForward, err)
		}
	}
	return read, nil
}

// beforeTerminate returns what of b, the client bytes read next, comes before the
// client's Terminate: the server session may be kept for another client, so the
// Terminate never reaches it (finish ends the session). The program flags a
// Terminate before the proxy can read it, and it is the last thing the client
// sent: it ends at Passed, past the bytes read that the program never saw.
func (ks *ksession) beforeTerminate(b []byte) []byte {
	st := ks.sm.Slot(sockmap.ToServer)
	if st.Flags&sockmap.FlagTerminate == 0 {
		return b
	}
	if !ks.baseKnown {
		// Within the splice the bytes read mix ones the program never saw with
		// handed ones: the Terminate, last of all, ends what is read.
		if t := len(b) - 5; t >= 0 && string(b[t:]) == "X\x00\x00\x00\x04" {
			return b[:t]
		}
		return b
	}
	at := ks.base[sockmap.ToServer] + st.Passed - 5
	from := ks.consumed[sockmap.ToServer]
	if from >= at {
		return nil
	}
	return b[:min(uint64(len(b)), at-from)]
}

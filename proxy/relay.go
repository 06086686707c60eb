package proxy

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"time"
)

// errTerminated: the client sent Terminate, which the relay kept from the server.
var errTerminated = errors.New("client terminated the session")

// relay copies bytes both ways with two goroutines until either side ends the
// session, and waits for both copies. A client that stops reading for writeTimeout
// while the server has data for it is cut off: relay then reports stalled, and the
// caller resets the client connection.
//
// With track set, relay follows the protocol: the client's Terminate is not passed
// on, and when the client ends the session while the server session is idle
// (keep), the backend is left open and unread for the caller to reset and reuse.
// Otherwise the backend is closed.
//
// When stop is closed (the proxy is closing), relay ends the session: a tracked
// one whose server's messages have reached the client whole is told so first
// (shutdownNotice), within stopNoticeWait.
func relay(client, backend net.Conn, writeTimeout time.Duration, track *sessionTrack, stop <-chan struct{}) (stalled, keep bool) {
	toBackend, toClient := make(chan error, 1), make(chan error, 1)
	go func() { toBackend <- copyTo(backend, client, 0, clientSide(track)) }()
	go func() { toClient <- copyTo(client, backend, writeTimeout, serverSide(track)) }()
	select {
	case err := <-toBackend:
		// The client ended the session (or writing to the server failed). Stop the
		// other copy without closing the backend, which may be reused.
		clientEnded := errors.Is(err, errTerminated) || !errors.Is(err, errWrite)
		backend.SetReadDeadline(time.Now())
		err2 := <-toClient
		keep = track != nil && clientEnded && errors.Is(err2, os.ErrDeadlineExceeded) && track.idle()
		if keep {
			backend.SetReadDeadline(time.Time{})
		} else {
			backend.Close()
		}
		client.SetReadDeadline(time.Now())
	case err := <-toClient:
		stalled = errors.Is(err, os.ErrDeadlineExceeded)
		if !stalled && !errors.Is(err, errWrite) && track.serverLost() {
			// The server's connection ended: tell the client (serverlost.go).
			if writeTimeout > 0 {
				client.SetWriteDeadline(time.Now().Add(writeTimeout))
			}
			client.Write(serverLostNotice())
		}
		backend.Close()
		client.SetReadDeadline(time.Now())
		<-toBackend
	case <-stop:
		backend.SetReadDeadline(time.Now())
		client.SetWriteDeadline(time.Now().Add(stopNoticeWait))
		err := <-toClient
		if track != nil && !errors.Is(err, errWrite) && track.server.atBoundary() {
			client.Write(shutdownNotice())
		}
		backend.Close()
		client.SetReadDeadline(time.Now())
		<-toBackend
	}
	return stalled, keep
}

// stopNoticeWait bounds how long a closing proxy waits for a client on the
// goroutine relay to take what its server sent and the notice after it.
const stopNoticeWait = time.Second

// errWrite marks a failure to write to the copy's destination.
var errWrite = errors.New("write")

func clientSide(t *sessionTrack) func([]byte) (int, error) {
	if t == nil {
		return nil
	}
	return func(b []byte) (int, error) {
		n := t.fromClient(b)
		if t.terminated {
			return n, errTerminated
		}
		return n, nil
	}
}

func serverSide(t *sessionTrack) func([]byte) (int, error) {
	if t == nil {
		return nil
	}
	return func(b []byte) (int, error) {
		t.fromServer(b)
		return len(b), nil
	}
}

// maxTLSWrite caps each write to a TLS connection, so that every TLS record
// carries at most 8 KB, as a Postgres server's do (it writes through an 8 KB
// buffer). libpq reads at least 8 KB at a time: of a larger record, OpenSSL keeps
// the rest decrypted in its own buffer, out of sight of a client that then waits
// for its socket to be readable (psycopg 3 in COPY TO STDOUT), which waits forever
// once the server has nothing more to send.
const maxTLSWrite = 8192

// copyTo copies src to dst, setting a write deadline before each write when
// timeout > 0. filter, if set, sees each chunk first and says how much of it to
// write and whether to stop after that.
func copyTo(dst, src net.Conn, timeout time.Duration, filter func([]byte) (int, error)) error {
	bp := getRelayBuf()
	defer putRelayBuf(bp)
	buf := *bp
	maxWrite := len(buf)
	if _, ok := dst.(*tls.Conn); ok {
		maxWrite = maxTLSWrite
	}
	for {
		n, rerr := src.Read(buf)
		var ferr error
		if n > 0 && filter != nil {
			n, ferr = filter(buf[:n])
		}
		for b := buf[:n]; len(b) > 0; {
			w := b[:min(len(b), maxWrite)]
			b = b[len(w):]
			if timeout > 0 {
				dst.SetWriteDeadline(time.Now().Add(timeout))
			}
			if _, err := dst.Write(w); err != nil {
				return errors.Join(errWrite, err)
			}
		}
		if ferr != nil {
			return ferr
		}
		if rerr != nil {
			return rerr
		}
	}
}

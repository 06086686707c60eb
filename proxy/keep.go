package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"go.uber.org/zap"
)

// A front's connection to a node can carry one session after another, so that a
// session through a front costs no connect and no TLS handshake to its node. The
// front asks for it at each start-up with the protocol option OptKeepConn; a node
// that keeps connections (Config.KeepConns) takes the option, and one that does
// not lists it as unrecognized in NegotiateProtocolVersion, as Postgres does with
// every _pq_ option it does not know, and serves the session as before.
//
// A session on a kept connection ends with the front's Terminate, which the front
// sends only when the session is idle and both streams are at a message
// boundary. The node then ends the session as for any client (the server session
// is reset and parked), answers keptAck, and reads the next start-up packet on the
// same connection. A node that cannot keep it (the session was not idle, its relay
// does not hand the connection back) closes it, and the front drops it.
const OptKeepConn = "_pq_.pgbranch.keep_conn"

// keptIdle is how long a node waits for the next start-up on a kept connection;
// fronts drop theirs sooner (front's keptFor).
const keptIdle = 2 * time.Minute

// keptAck is what a node answers a kept connection's Terminate with:
// ReadyForQuery, idle, for the next session's start-up.
var keptAck = []byte{'Z', 0, 0, 0, 5, 'I'}

// terminateMsg is the protocol's Terminate.
var terminateMsg = []byte{'X', 0, 0, 0, 4}

// A ConnKeeper is a Lease (a front's, to a node) that takes its server connection
// back once the session has ended cleanly, for the next session to the same node.
type ConnKeeper interface {
	// Keep is given the connection, with the node ready for the next start-up.
	Keep(c net.Conn)
	// Kept reports whether the lease's last Dial handed out a kept connection,
	// which the node may have closed meanwhile: a start-up that fails on it is
	// tried once more on a new one (DialNew).
	Kept() bool
	// DialNew connects to the node anew, passing over the kept connections: for
	// that retry, and for cancel requests (which end their connection).
	DialNew(ctx context.Context) (net.Conn, error)
}

// takeKeepOption removes OptKeepConn from the client's protocol options and
// reports whether this server keeps the connection for another session: it
// does when it keeps connections and can tell when a session ended idle.
func (s *Server) takeKeepOption(conn net.Conn, st *clientStartup) bool {
	i := slices.Index(st.pq, OptKeepConn)
	if i < 0 || !s.cfg.KeepConns || !s.cfg.Reuse {
		return false
	}
	if s.kernel != nil && plainTCP(conn) != nil {
		// The kernel relay carries the session, and does not hand the
		// connection back.
		return false
	}
	st.pq = slices.Delete(st.pq, i, i+1)
	return true
}

// passOn ends a session whose node connection the lease keeps: the node is sent
// Terminate and, once it has answered keptAck, the connection goes to the lease;
// otherwise it is closed.
func (s *Server) passOn(k ConnKeeper, sc *serverConn, log *zap.Logger) {
	if err := sc.attach(); err != nil {
		log.Debug("node connection not kept", zap.Error(err))
		return
	}
	if err := endKept(sc.Conn, s.cfg.CancelTimeout); err != nil {
		if ce := log.Check(zap.DebugLevel, "node connection not kept"); ce != nil {
			ce.Write(zap.Error(err))
		}
		sc.Close()
		return
	}
	s.Stats.ConnsKept.Add(1)
	k.Keep(sc.Conn)
}

// endKept sends Terminate on a kept connection and reads the node's keptAck,
// within timeout.
func endKept(c net.Conn, timeout time.Duration) error {
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(terminateMsg); err != nil {
		return err
	}
	typ, msg, err := readMessage(c, len(keptAck))
	if err != nil {
		return err
	}
	if typ != 'Z' || len(msg) != len(keptAck) || msg[5] != 'I' {
		return fmt.Errorf("%w: the node answered Terminate with %q", errProtocol, typ)
	}
	return c.SetDeadline(time.Time{})
}

// errKeptClosing: the server is shutting down and keeps no connection idle.
var errKeptClosing = errors.New("shutting down")

// waitKept registers a kept connection that waits for its next start-up, so
// that a drain closes it rather than waiting for it; the returned func
// unregisters it.
func (s *Server) waitKept(c net.Conn) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, errKeptClosing
	}
	s.keptWaiting[c] = struct{}{}
	return func() {
		s.mu.Lock()
		delete(s.keptWaiting, c)
		s.mu.Unlock()
	}, nil
}

// closeKeptWaiting closes the kept connections that wait for a start-up; s.mu
// is held.
func (s *Server) closeKeptWaiting() {
	for c := range s.keptWaiting {
		c.Close()
	}
	clear(s.keptWaiting)
}

// ackKept tells the front on c, whose session ended cleanly, that the node is
// ready for its next start-up, and returns c; nil when c is nil or the front is
// gone.
func (s *Server) ackKept(c net.Conn, log *zap.Logger) net.Conn {
	if c == nil {
		return nil
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		// Shutting down: the front gets no ack and drops the connection.
		c.Close()
		return nil
	}
	c.SetWriteDeadline(time.Now().Add(s.cfg.CancelTimeout))
	if _, err := c.Write(keptAck); err != nil {
		if ce := log.Check(zap.DebugLevel, "kept connection closed"); ce != nil {
			ce.Write(zap.Error(err))
		}
		return nil
	}
	c.SetWriteDeadline(time.Time{})
	return c
}

// nextStartup reads the start-up packet of the next session on a kept
// connection: a StartupMessage, or a CancelRequest (handled), within keptIdle.
// The connection stays as it is (TLS or not) from its first session, prev.
func (s *Server) nextStartup(c net.Conn, prev clientStartup, log *zap.Logger) (clientStartup, error) {
	st := clientStartup{conn: c, tls: prev.tls}
	done, err := s.waitKept(c)
	if err != nil {
		return st, err
	}
	defer done()
	c.SetDeadline(time.Now().Add(keptIdle))
	st, err = s.readStartupPackets(st, true, log)
	c.SetDeadline(time.Now().Add(s.cfg.StartupTimeout)) // the rest of the start-up, as on a new connection
	return st, err
}

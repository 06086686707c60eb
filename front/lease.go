package front

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// lease is a session's way to its branch's node. The node counts the session and
// keeps the branch's server sessions for reuse; the front keeps nothing, so the
// lease parks nothing and releasing it has nothing to undo.
type lease struct {
	node        string // its id
	addr        string
	opts        router.Options // the route's, with the source the front resolved
	dial        Dialer
	deadline    time.Time // until when a node that is away is tried again (Acquire's deadline)
	unreachable func()    // called when the node does not answer; nil: nothing to do
	// reroute, for a new name's lease, finds where the name went when the node
	// refused it (Reroute); nil for a branch that has a row.
	reroute func(ctx context.Context) (proxy.Lease, error)
	// conns are the connections kept to nodes (nil: none kept); kept says
	// whether Dial's last connection was one of them.
	conns *nodeConns
	kept  *atomic.Bool
	// confirm checks that the branch is still the node's (Confirm); nil: no check.
	confirm func(ctx context.Context) error
}

// dialTimeout bounds one connect to a node: one that is cut off is given up in
// this time rather than at the client's start-up deadline.
const dialTimeout = 5 * time.Second

// ownerRetry is how long a node that is away (refuses connections, or its lease
// ran out) is waited for: one restarting (a new process, a pod restart) is back
// within it, and its clients wait instead of failing. It bounds the whole wait of
// a session, for the node's lease (awaitOwner) and for its connect (Dial).
const ownerRetry = 10 * time.Second

var (
	_ proxy.RouteForwarder = (*lease)(nil)
	_ proxy.Rerouter       = (*lease)(nil)
	_ proxy.ConnKeeper     = (*lease)(nil)
	_ proxy.Confirmer      = (*lease)(nil)
)

// Reroute, for a new name's lease, follows the name to the node that made its
// branch when the node it was placed on refused the session: fronts that saw
// different live nodes (one joining, a lease running out, a seed copy
// completing) placed the name on two nodes, and the other won the name's row.
// The unique row decides; the client is served by the winner rather than
// refused. nil when the name is on no other live node.
func (l *lease) Reroute(ctx context.Context) (proxy.Lease, error) {
	if l.reroute == nil {
		return nil, nil
	}
	return l.reroute(ctx)
}

// Dial gives the session a connection to the node: one kept from an earlier
// session when there is one, else a new one (DialNew); the proxy then starts
// the session there with the route in its startup parameters (RouteParams).
func (l *lease) Dial(ctx context.Context) (net.Conn, error) {
	if l.conns != nil {
		c := l.conns.take(l.node, l.addr)
		l.kept.Store(c != nil)
		if c != nil {
			return c, nil
		}
	}
	return l.DialNew(ctx)
}

// DialNew connects to the node, trying again until l.deadline while it is not
// reachable, each connect bounded by dialTimeout and by l.deadline. A cancel
// request goes this way, and the node forwards it to the branch's server.
func (l *lease) DialNew(ctx context.Context) (net.Conn, error) {
	for {
		end := time.Now().Add(dialTimeout)
		if l.deadline.Before(end) {
			end = l.deadline
		}
		dctx, cancel := context.WithDeadline(ctx, end)
		c, err := l.dial(dctx, l.node, l.addr)
		cancel()
		if err == nil {
			return c, nil
		}
		if !away(err) {
			// The node answered, and refused us (its certificate is not the one
			// expected, or it speaks no TLS): waiting changes nothing.
			return nil, &proxy.ClientError{Code: codeCannotConnectNow, Message: "the branch's node refused the front",
				Hint: "the front and the node do not agree on the cluster's certificates; see the front's log", Err: err}
		}
		wait := min(200*time.Millisecond, time.Until(l.deadline))
		if wait <= 0 || ctx.Err() != nil {
			if l.unreachable != nil && ctx.Err() == nil {
				l.unreachable() // not when the client's own deadline ran out
			}
			return nil, &proxy.ClientError{Code: codeCannotConnectNow, Message: "the branch's node is not reachable",
				Hint: "try again in a moment", Err: err}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// away reports whether a failed dial means a node that is away (not listening,
// unreachable, not answering in time), which a restart brings back, rather than
// one that answered and refused.
func away(err error) bool {
	var ne net.Error
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.Is(err, io.EOF) || errors.As(err, &ne) && ne.Timeout()
}

// RouteParams gives the node the route's options, the source named: the node
// may know other sources by the same database. A lease that keeps connections
// asks the node to keep this one (proxy.OptKeepConn).
func (l *lease) RouteParams() map[string]string {
	p := l.opts.Params()
	if l.conns != nil {
		p[proxy.OptKeepConn] = "on"
	}
	return p
}

// Keep keeps c, ready for another session, for the next session to the node.
func (l *lease) Keep(c net.Conn) { l.conns.put(l.node, l.addr, c) }

// Kept reports whether Dial's last connection was a kept one.
func (l *lease) Kept() bool { return l.kept != nil && l.kept.Load() }

func (l *lease) TakeIdle(string) io.Closer { return nil }

func (l *lease) Release() {}

func (l *lease) Park(_ string, c io.Closer) { c.Close() }

// noticeLease is a lease with a NOTICE for its client.
type noticeLease struct {
	lease
	notices []string
}

var _ proxy.Noticer = (*noticeLease)(nil)

func (l *noticeLease) Notices() []string { return l.notices }

// unackedFor bounds how long what a front sends to a node may go
// unacknowledged (TCP_USER_TIMEOUT) before the connection fails: a kept
// connection to a node that went away without a word (a host that rebooted, a
// route that went dark) then fails within it, and is tried again on a new
// one, rather than at the client's deadline; the keepalive probes of an idle
// one come under the same bound. A node that is slow to answer, or that reads
// slowly, acknowledges all the same.
const unackedFor = 2 * dialTimeout

// nodeDialer returns the dialer of connections to nodes.
func nodeDialer() *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(unackedFor/time.Millisecond))
		})
		return errors.Join(err, serr)
	}}
}

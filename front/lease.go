package front

import (
	"context"
	"io"
	"net"
	"time"

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
	unreachable func() // called when the node does not answer; nil: nothing to do
}

// dialTimeout bounds a connect to a node: one that is cut off is given up in
// this time rather than at the client's start-up deadline.
const dialTimeout = 5 * time.Second

var _ proxy.RouteForwarder = (*lease)(nil)

// Dial connects to the node; the proxy then starts the session there with the
// route in its startup parameters (RouteParams). A cancel request goes the same
// way, and the node forwards it to the branch's server.
func (l *lease) Dial(ctx context.Context) (net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := l.dial(dctx, l.node, l.addr)
	if err != nil {
		if l.unreachable != nil {
			l.unreachable()
		}
		return nil, &proxy.ClientError{Code: codeCannotConnectNow, Message: "the branch's node is not reachable",
			Hint: "try again in a moment", Err: err}
	}
	return c, nil
}

// RouteParams gives the node the route's options, the source named: the node
// may know other sources by the same database.
func (l *lease) RouteParams() map[string]string { return l.opts.Params() }

func (l *lease) TakeIdle(string) io.Closer { return nil }

func (l *lease) Release() {}

func (l *lease) Park(_ string, c io.Closer) { c.Close() }

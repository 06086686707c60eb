package front

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// A client on a node behind a front holds the node's own cancel key, passed
// through, and a load balancer may send its cancel request to any front. A
// front that issued no session that key passes the request to every live node:
// the one that issued the key passes it to its backend, the others know no such
// key and drop it, as Postgres drops a cancel with a wrong key. Keys keep all
// their random bits this way; nodes are few, and cancels rare.

// CancelElsewhere passes a cancel request to every live node, at once, and
// returns when each has taken it or timeout has passed.
func (b *Branches) CancelElsewhere(pid uint32, secret []byte, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	nodes, err := b.cat.Nodes(ctx)
	if err != nil {
		return
	}
	msg, err := (&pgproto3.CancelRequest{ProcessID: pid, SecretKey: secret}).Encode(nil)
	if err != nil {
		return
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		if n.State == catalog.NodeDead || n.LeaseAge >= 0 || n.Addr == "" {
			continue
		}
		wg.Add(1)
		go func(node, addr string) {
			defer wg.Done()
			c, err := b.dial(ctx, node, addr)
			if err != nil {
				return
			}
			defer c.Close()
			if d, ok := ctx.Deadline(); ok {
				c.SetDeadline(d)
			}
			if _, err := c.Write(msg); err == nil {
				var one [1]byte
				c.Read(one[:]) // the node closes once it has passed the request on
			}
		}(n.ID, n.Addr)
	}
	wg.Wait()
}

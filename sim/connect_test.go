//go:build simmeasure

package sim

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// M1's samples per path: connects to a running branch, and creations.
const (
	connectRunning = 30
	connectCold    = 10
)

// timedPath is one way to connect, timed: try(i) connects (to a new name of
// its own for a creation), runs SELECT 1 and hangs up.
type timedPath struct {
	name string
	try  func(i int) (time.Duration, error)
}

// testConnectOverhead is M1: connect to first query (pgx, from the client
// host) for a running branch and for a new one, through the single-host
// server, a node reached directly (TLS sessions resumed), one front and one node, the cluster's
// fronts in turn (their names placed on either node), and the plain pair. The
// paths take turns, rotated from sample to sample. No latency is injected.
func testConnectOverhead(t *testing.T, ctx context.Context, c *cluster, x *extras) {
	node := c.nodes[0]
	single, direct := plain("single", x.single), x.direct(node.name, node)
	front1 := plain(c.fronts[0].name, c.fronts[0])
	pnode, pfront := plain("plain node", x.plainNode), plain("plain front", x.plainFront)
	fronts := make([]*endpoint, len(c.fronts))
	for i, f := range c.fronts {
		fronts[i] = plain(f.name, f)
	}
	x.createOn(t, ctx, c, node, "m1-n1")
	x.createOn(t, ctx, c, c.nodes[1], "m1-n2")
	at := func(e *endpoint, db string) func(int) (time.Duration, error) {
		return func(int) (time.Duration, error) { return e.firstQuery(ctx, db) }
	}
	running := []timedPath{
		{"single-host server", at(single, "app@m1")},
		{"node-1 directly (mTLS)", at(direct, "app@m1-n1")},
		{"front-1 + node-1 (mTLS)", at(front1, "app@m1-n1")},
		{"3 fronts + 2 nodes (mTLS)", func(i int) (time.Duration, error) {
			return fronts[i%len(fronts)].firstQuery(ctx, fmt.Sprintf("app@m1-n%d", 1+i%2))
		}},
		{"plain node directly (TCP)", at(pnode, "app@m1")},
		{"plain front + plain node (TCP)", at(pfront, "app@m1")},
	}
	for _, p := range running { // creates m1 where it is new, warms every cache
		if _, err := p.try(0); err != nil {
			t.Fatal(err)
		}
	}
	logConnects(t, "a running branch", running, sample(t, running, connectRunning))

	name := func(kind string, i int) string { return fmt.Sprintf("m1-new-%s-%d", kind, i) }
	cold := func(e *endpoint, kind string) func(int) (time.Duration, error) {
		return func(i int) (time.Duration, error) { return e.firstQuery(ctx, "app@"+name(kind, i)) }
	}
	created := []timedPath{
		{"single-host server", cold(single, "s")},
		{"node-1 directly (mTLS)", cold(direct, "n")},
		{"3 fronts + 2 nodes (mTLS)", func(i int) (time.Duration, error) {
			return fronts[i%len(fronts)].firstQuery(ctx, "app@"+name("f", i))
		}},
		{"plain node directly (TCP)", cold(pnode, "pn")},
		{"plain front + plain node (TCP)", cold(pfront, "pf")},
	}
	logConnects(t, "a new branch", created, sample(t, created, connectCold))
	for i := range connectCold {
		destroy := func(m *member, n string) {
			if err := m.destroy(ctx, n); err != nil {
				t.Error(err)
			}
		}
		destroy(x.single, name("s", i))
		destroy(node, name("n", i))
		row, _ := c.cat.branch(t, name("f", i))
		destroy(c.nodeByID(t, row.node), name("f", i))
		destroy(x.plainNode, name("pn", i))
		destroy(x.plainNode, name("pf", i))
	}
}

// sample runs n tries of every path, the paths rotated from try to try.
func sample(t *testing.T, paths []timedPath, n int) [][]time.Duration {
	t.Helper()
	out := make([][]time.Duration, len(paths))
	for i := range n {
		for _, p := range rotation(len(paths), i) {
			d, err := paths[p].try(i)
			if err != nil {
				t.Fatalf("%s, try %d: %v", paths[p].name, i, err)
			}
			out[p] = append(out[p], d)
		}
	}
	return out
}

// logConnects logs each path's p50 and p95.
func logConnects(t *testing.T, what string, paths []timedPath, ds [][]time.Duration) {
	for i, p := range paths {
		t.Logf("M1 %s: %-32s p50 %6.2f ms, p95 %6.2f ms, max %6.2f ms (%d)", what, p.name,
			ms(percentile(ds[i], 50)), ms(percentile(ds[i], 95)), ms(percentile(ds[i], 100)), len(ds[i]))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

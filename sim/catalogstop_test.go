package sim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
)

// How often a node renews its lease, and runs its janitor (every third
// heartbeat: branches/node.go).
const (
	nodeBeat    = branches.NodeTTL / 3
	janitorPass = 3 * nodeBeat
)

// baseline is how long M9 measures before it stops the catalog.
const baseline = 2 * time.Second

// testCatalogStopped is M9: the catalog stopped as `pg_ctl stop -m immediate`
// does for outage, then started again, under nodes started with a short
// --node-dead-after (deadAfter) so that the outage outlasts lease + dead-after
// and nodes would be declared dead after it but for the janitor's wait.
// Before it, one branch per node is read through every front (each caches
// its route); an established session per branch reads in a loop, a probe per
// front and branch connects again and again. Established sessions must read
// on throughout, every new connection to the running branches must be served,
// a new name must get 57P03 "catalog unavailable" (its front answering, not
// timing out), and once the catalog is back no node may be declared dead
// (same epochs, active) by the time each janitor has run after its wait.
// Reported: reads per second of the sessions before, during and after, the
// new names' answer time, the time to the first creation after the catalog is
// back.
func testCatalogStopped(t *testing.T, ctx context.Context, c *cluster, outage, deadAfter time.Duration) {
	on := branchesOn(t, ctx, c, "m9", 1)
	var running []string
	epochs := map[string]int64{}
	for _, n := range c.nodes {
		running = append(running, on[n.name][0])
		epochs[n.name], _ = c.cat.node(t, n.name)
	}
	for _, f := range c.fronts {
		for _, b := range running {
			if v, err := c.read(ctx, f, b); err != nil || v != b {
				t.Fatalf("%s through %s before the outage: %q %v", b, f.name, v, err)
			}
		}
	}
	var loads []*loadSession
	for i, b := range running {
		s, err := c.startLoad(ctx, c.fronts[i%len(c.fronts)], b)
		if err != nil {
			t.Fatal(err)
		}
		loads = append(loads, s)
	}
	defer func() {
		for _, s := range loads {
			s.stop()
		}
	}()
	smp := startNameSampler(c)
	var probes []*probe
	for _, f := range c.fronts {
		for _, b := range running {
			probes = append(probes, c.startProbe(f, b, b))
		}
	}
	time.Sleep(baseline)

	down := time.Now()
	c.cat.crash(t)
	restarted := false
	defer func() {
		if !restarted {
			c.cat.restart(t, context.Background())
		}
	}()
	// New names, one per front, once the outage is a second old.
	time.Sleep(time.Second)
	creates := make([]attempt, len(c.fronts))
	var wg sync.WaitGroup
	for i, f := range c.fronts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err := c.read(cctx, f, fmt.Sprintf("m9-new-%d", i))
			creates[i] = attempt{at: start, took: time.Since(start), err: err}
		}()
	}
	wg.Wait()
	time.Sleep(time.Until(down.Add(outage)))
	up := time.Now()
	c.cat.restart(t, ctx)
	restarted = true
	back := time.Since(up)
	stale := leaseAges(t, c)
	answered := up.Add(back)
	created, tries, first := firstCreate(t, ctx, c, "m9-after")
	checkedAt := up.Add(deadAfter + janitorPass + time.Second)
	time.Sleep(time.Until(checkedAt))
	for _, p := range probes {
		p.stop()
	}
	samples, unnamed, bad := smp.stop()
	end := time.Now()
	for _, s := range loads {
		s.stop()
	}

	for i, a := range creates {
		if a.code() != "57P03" || message(a.err) != "catalog unavailable" {
			t.Errorf("a new name through %s while the catalog was down: %v, want 57P03 catalog unavailable", c.fronts[i].name, a.err)
		}
	}
	for _, p := range probes {
		for _, a := range p.failures() {
			t.Errorf("%s through %s %s after the catalog stopped: %v", p.branch, p.front.name, a.at.Sub(down).Round(time.Millisecond), a.err)
		}
		t.Logf("M9 new connections to %s through %s: before %s; during %s; while it started %s; after %s", p.branch, p.front.name,
			p.summary(time.Time{}, down), p.summary(down, up), p.summary(up, answered), p.summary(answered, end))
	}
	for _, s := range loads {
		if at, err := s.failure(); err != nil {
			t.Errorf("the session on %s through %s failed %s after the catalog stopped: %v", s.branch, s.front.name, at.Sub(down).Round(time.Millisecond), err)
		}
		t.Logf("M9 established session on %s through %s: %.0f reads/s in the %s before, %.0f during, %.0f after", s.branch, s.front.name,
			s.rate(down.Add(-baseline), down), baseline, s.rate(down, up), s.rate(answered, end))
	}
	for _, n := range c.nodes {
		if e, state := c.cat.node(t, n.name); e != epochs[n.name] || state != "active" {
			t.Errorf("%s after the outage: epoch %d %s, want %d active (not declared dead)", n.name, e, state, epochs[n.name])
		}
	}
	if n := c.cat.count(t, "SELECT count(*) FROM branches WHERE state = 'lost'"); n != 0 {
		t.Errorf("%d branches lost after the outage, want none", n)
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d samples found a branch or a name running twice: %v", len(bad), samples, bad)
	}
	t.Logf("M9: catalog stopped %s (immediate) with --node-dead-after %s; a new name got 57P03 after %v; the catalog answered %s after its start, when the nodes' leases had run out %v before; first creation served %s after its start (%d tries, the first answered %q); no node declared dead %s after it; %d samples (%d with a postmaster the catalog could not name while it was down), %d with a branch or name running twice",
		up.Sub(down).Round(time.Millisecond), deadAfter, tookAll(creates), back.Round(time.Millisecond), stale, created.Round(time.Millisecond),
		tries, first, checkedAt.Sub(up).Round(time.Millisecond), samples, unnamed, len(bad))
	if n := c.cat.count(t, "SELECT count(*) FROM branches WHERE name LIKE 'm9-new-%'"); n != 0 {
		t.Errorf("%d rows of the names asked for while the catalog was down, want none", n)
	}
	row, _ := c.cat.branch(t, "m9-after")
	on[row.node] = append(on[row.node], "m9-after")
	destroyAll(t, ctx, c, on)
}

// leaseAges is how long ago each node's lease ran out, by the catalog's clock
// (negative: it still runs).
func leaseAges(t *testing.T, c *cluster) map[string]time.Duration {
	t.Helper()
	out := map[string]time.Duration{}
	for _, n := range c.nodes {
		var ns int64
		if err := c.cat.db.QueryRow(`SELECT (extract(epoch FROM now()) * 1e9)::bigint - lease_until FROM nodes WHERE id = $1`, n.name).Scan(&ns); err != nil {
			t.Fatalf("catalog: lease of %s: %v", n.name, err)
		}
		out[n.name] = time.Duration(ns).Round(time.Millisecond)
	}
	return out
}

// firstCreate asks for the new name through the first front every 100 ms until
// it is served, for up to a minute, and returns how long that took, the
// number of tries and what the first try was answered ("ok" if it was served).
func firstCreate(t *testing.T, ctx context.Context, c *cluster, name string) (time.Duration, int, string) {
	t.Helper()
	start := time.Now()
	first := ""
	for tries := 1; ; tries++ {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		v, err := c.read(cctx, c.fronts[0], name)
		cancel()
		if tries == 1 {
			first = "ok"
			if err != nil {
				first = sqlstate(err) + " " + message(err)
			}
		}
		if err == nil && v == "seed" {
			return time.Since(start), tries, first
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("%s: not served within a minute of the catalog's start: %q %v", name, v, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tookAll is how long each attempt took.
func tookAll(as []attempt) []time.Duration {
	out := make([]time.Duration, len(as))
	for i, a := range as {
		out[i] = a.took.Round(time.Millisecond)
	}
	return out
}

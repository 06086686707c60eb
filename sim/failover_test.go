package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCatalogFailover is M10: the catalog fails over to a streaming standby,
// first with synchronous replication (nothing committed is lost), then with
// asynchronous replication and the link to the standby cut, so that what was
// committed meanwhile is lost: a node's registration at a new epoch and a new
// branch's row. Nodes and fronts have both catalog hosts in their URL and are
// not restarted for it. Its standbys' cleanups are top's (the cluster's test):
// the last one promoted is the catalog from then on.
func testCatalogFailover(t, top *testing.T, ctx context.Context, c *cluster, deadAfter time.Duration) {
	cat, cat2 := c.net.hosts["cat"], c.net.hosts[standbyHost]
	if c.cat.host != cat {
		t.Fatalf("the catalog runs on %s, want %s", c.cat.host.name, cat.name)
	}
	c.waitSeeds(t) // M7 left node-2 copying it again
	standby := startStandby(t, top, ctx, c.cat, cat2, filepath.Join(c.dir, "catalog-"+cat2.name))
	c.cat.setSync(t, ctx, cat2.name)
	failoverSync(t, ctx, c, standby, deadAfter)
	if t.Failed() {
		t.Logf("the members' logs:%s", c.logs())
		return
	}
	standby = startStandby(t, top, ctx, c.cat, cat, filepath.Join(c.dir, "catalog-"+cat.name))
	c.cat.setSync(t, ctx, "")
	failoverAsync(t, ctx, c, standby, deadAfter)
	if t.Failed() {
		t.Logf("the members' logs:%s", c.logs())
	}
}

// failoverSync: one branch per node read through every front, an established
// session on each reading in a loop, a new client per front and branch every
// 100 ms; the primary stopped as `pg_ctl stop -m immediate` does and the
// standby promoted at once; a new name asked for through the fronts in turn
// every 100 ms from the kill on. Established sessions and running branches
// must be served throughout, a new name created within a minute; once every
// janitor has run since, no node declared dead, no epoch changed, no row lost,
// no name running twice. Reported: the create downtime (kill to the first new
// name served), the promotion's time, the sessions' reads per second.
func failoverSync(t *testing.T, ctx context.Context, c *cluster, standby *catalogServer, deadAfter time.Duration) {
	on := branchesOn(t, ctx, c, "m10", 1)
	var running []string
	epochs := map[string]int64{}
	for _, n := range c.nodes {
		running = append(running, on[n.name][0])
		epochs[n.name], _ = c.cat.node(t, n.name)
	}
	names := c.cat.count(t, "SELECT count(*) FROM branches")
	lost := c.cat.count(t, "SELECT count(*) FROM branches WHERE state = 'lost'") // M8's and M7's
	var loads []*loadSession
	for i, b := range running {
		s, err := c.startLoad(ctx, c.fronts[i%len(c.fronts)], b)
		if err != nil {
			t.Fatal(err)
		}
		loads = append(loads, s)
		defer s.stop()
	}
	smp := startNameSampler(c)
	var probes []*probe
	for _, f := range c.fronts {
		for _, b := range running {
			p := c.startProbe(f, b, b)
			probes = append(probes, p)
			defer p.stop()
		}
	}
	time.Sleep(baseline)

	down := time.Now()
	old := c.cat
	old.crash(t)
	standby.promote(t, ctx)
	promoted := time.Since(down)
	c.cat = standby
	created, tries, first := createAgain(t, ctx, c, "m10-sync-new", down)
	checkedAt := down.Add(promoted + deadAfter + janitorPass + time.Second)
	time.Sleep(time.Until(checkedAt))
	for _, p := range probes {
		p.stop()
	}
	samples, unnamed, bad := smp.stop()
	end := time.Now()
	for _, s := range loads {
		s.stop()
	}

	for _, p := range probes {
		for _, a := range p.failures() {
			t.Errorf("%s through %s %s after the kill: %v", p.branch, p.front.name, a.at.Sub(down).Round(time.Millisecond), a.err)
		}
		t.Logf("M10 sync: new connections to %s through %s: before %s; until promoted %s; after %s", p.branch, p.front.name,
			p.summary(time.Time{}, down), p.summary(down, down.Add(promoted)), p.summary(down.Add(promoted), end))
	}
	for _, s := range loads {
		if at, err := s.failure(); err != nil {
			t.Errorf("the session on %s through %s failed %s after the kill: %v", s.branch, s.front.name, at.Sub(down).Round(time.Millisecond), err)
		}
		t.Logf("M10 sync: established session on %s through %s: %.0f reads/s in the %s before, %.0f until promoted, %.0f after",
			s.branch, s.front.name, s.rate(down.Add(-baseline), down), baseline, s.rate(down, down.Add(promoted)), s.rate(down.Add(promoted), end))
	}
	for _, n := range c.nodes {
		if e, state := c.cat.node(t, n.name); e != epochs[n.name] || state != "active" {
			t.Errorf("%s after the failover: epoch %d %s, want %d active (not declared dead, nothing rolled back)", n.name, e, state, epochs[n.name])
		}
	}
	if n := c.cat.count(t, "SELECT count(*) FROM branches WHERE state = 'lost'"); n != lost {
		t.Errorf("%d branches lost after the failover, want the %d before it", n, lost)
	}
	if n := c.cat.count(t, "SELECT count(*) FROM branches WHERE name <> 'm10-sync-new'"); n != names {
		t.Errorf("%d branch rows after the failover besides the new name, want the %d before it", n, names)
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d samples found a branch or a name running twice: %v", len(bad), samples, bad)
	}
	t.Logf("M10 sync: primary killed, standby promoted %s later (pg_ctl promote -w); a new name served %s after the kill (%d tries, the first answered %q); no node declared dead %s after the kill; %d samples (%d with a postmaster not named while the catalog was away), %d with a branch or name running twice",
		promoted.Round(time.Millisecond), created.Round(time.Millisecond), tries, first, checkedAt.Sub(down).Round(time.Millisecond), samples, unnamed, len(bad))
}

// createAgain asks for the new name through the fronts in turn every 100 ms
// until it is served, for up to a minute after since, and returns how long
// after since that was, the number of tries and the first try's answer.
func createAgain(t *testing.T, ctx context.Context, c *cluster, name string, since time.Time) (time.Duration, int, string) {
	t.Helper()
	first := ""
	for tries := 1; ; tries++ {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		v, err := c.read(cctx, c.fronts[tries%len(c.fronts)], name)
		cancel()
		if tries == 1 {
			first = "ok"
			if err != nil {
				first = sqlstate(err) + " " + message(err)
			}
		}
		if err == nil && v == "seed" {
			return time.Since(since), tries, first
		}
		if time.Since(since) > time.Minute {
			t.Fatalf("%s: not served within a minute of the failover: %q %v%s", name, v, err, c.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nodeLogSays reports whether node n logged text since its log was size bytes.
func nodeLogSays(n *member, size int64, text string) bool {
	b, err := os.ReadFile(n.log)
	if err != nil || int64(len(b)) < size {
		return false
	}
	return strings.Contains(string(b[size:]), text)
}

// logSize is the size of n's log now.
func logSize(n *member) int64 {
	fi, err := os.Stat(n.log)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// orphanGone reports whether branch id has no postmaster, no mount and no
// directory left on node n.
func orphanGone(t *testing.T, c *cluster, n *member, id int64) bool {
	in, err := instances(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range in {
		if i.branch == id && i.node == n.host.name {
			return false
		}
	}
	dir := filepath.Join(n.state, "branches", fmt.Sprint(id))
	if len(mountsUnder(dir)) > 0 {
		return false
	}
	_, err = os.Stat(dir)
	return os.IsNotExist(err)
}

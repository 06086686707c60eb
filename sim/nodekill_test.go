package sim

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// servedAgainTarget is the design's bound on a node's return: its branches are
// served again within 10 s of the node starting again.
const servedAgainTarget = 10 * time.Second

// branchesOn creates branches through the fronts (row 1's v set to the name)
// until every node holds at least per, and returns each node's names.
func branchesOn(t *testing.T, ctx context.Context, c *cluster, prefix string, per int) map[string][]string {
	t.Helper()
	on := map[string][]string{}
	for i := 0; ; i++ {
		enough := true
		for _, n := range c.nodes {
			enough = enough && len(on[n.name]) >= per
		}
		if enough {
			return on
		}
		if i == 12*per {
			t.Fatalf("%d new names did not give every node %d branches: %v", i, per, on)
		}
		name := fmt.Sprintf("%s-%d", prefix, i)
		if err := c.write(ctx, c.fronts[i%len(c.fronts)], name, name); err != nil {
			t.Fatalf("create %s: %v%s", name, err, c.logs())
		}
		row, _ := c.cat.branch(t, name)
		on[row.node] = append(on[row.node], name)
	}
}

// testNodeKill is M6: the node victim killed with SIGKILL (its branch servers
// and mounts stay, as on a host whose agent crashed) and started again 3 s later
// on the same state directory. Meanwhile a probe per front reads one of its
// branches and one of other's, and a sampler checks every 100 ms that no branch
// runs twice. A front waits up to 10 s for a node that is away, so every session
// begun after the kill must be served, those begun while the node was down once
// it is back; its branch must be served again within servedAgainTarget of its
// start; other's must not fail once; the killed run's postmasters must be gone
// after the restart, every postmaster and mount left under its state directory
// must be a running branch's, and it must come back at the next epoch with its
// rows. It returns how long after the node's start its branch was served
// through every front.
func testNodeKill(t *testing.T, ctx context.Context, c *cluster, on map[string][]string, victim, other *member) (served time.Duration) {
	mine, theirs := on[victim.name], on[other.name][0]
	for _, b := range mine {
		if v, err := c.read(ctx, c.fronts[0], b); err != nil || v != b {
			t.Fatalf("wake %s before the kill: %q %v", b, v, err)
		}
	}
	epoch, _ := c.cat.node(t, victim.name)
	old := postmastersOf(t, c, victim)
	if len(old) < len(mine) {
		t.Fatalf("%s runs %d postmasters before the kill, want at least %d", victim.name, len(old), len(mine))
	}
	smp := startSampler(c.dir)
	var vp, op []*probe
	for _, f := range c.fronts {
		vp = append(vp, c.startProbe(f, mine[0], mine[0]))
		op = append(op, c.startProbe(f, theirs, theirs))
	}
	time.Sleep(300 * time.Millisecond)

	killed := time.Now()
	victim.kill9()
	if left := postmastersOf(t, c, victim); len(left) != len(old) {
		t.Fatalf("after SIGKILL %d of %s's %d postmasters run, want all (a killed agent leaves them)", len(left), victim.name, len(old))
	}
	time.Sleep(time.Until(killed.Add(3 * time.Second)))
	returned := time.Now()
	victim.start(t)
	listening := time.Since(returned)
	for _, p := range vp {
		eventually(t, 60*time.Second, mine[0]+" served again through "+p.front.name, func() bool {
			_, ok := p.servedAfter(returned)
			return ok
		})
		a, _ := p.servedAfter(returned)
		served = max(served, a.at.Add(a.took).Sub(returned))
	}
	time.Sleep(500 * time.Millisecond) // a few sessions on the node back
	stopped := time.Now()
	for _, p := range append(vp, op...) {
		p.stop()
	}
	samples, bad := smp.stop()

	var held []time.Duration
	for _, p := range vp {
		for _, a := range p.attempts() {
			if a.at.Before(killed) {
				continue // in flight at the kill, or before it
			}
			if a.err != nil {
				t.Errorf("%s through %s %s after its node was killed: %v, want it served (fronts wait up to 10 s for an away node, and it was back after 3 s)",
					mine[0], p.front.name, a.at.Sub(killed).Round(time.Millisecond), a.err)
			} else if a.at.Before(returned) {
				held = append(held, a.took)
			}
		}
		t.Logf("M6 %s (killed node) through %s: before the kill %s; begun while down %s; after its start %s", mine[0], p.front.name,
			p.summary(time.Time{}, killed), p.summary(killed, returned), p.summary(returned, stopped))
	}
	for _, p := range op {
		for _, a := range p.failures() {
			t.Errorf("%s (other node) through %s at %s: %v", theirs, p.front.name, a.at.Sub(killed).Round(time.Millisecond), a.err)
		}
		t.Logf("M6 %s (other node) through %s: %s", theirs, p.front.name, p.summary(time.Time{}, stopped))
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d samples found a branch running twice: %v", len(bad), samples, bad)
	}
	if served > servedAgainTarget {
		t.Errorf("%s served again %s after %s started, the design's target is %s", mine[0], served.Round(time.Millisecond), victim.name, servedAgainTarget)
	}
	t.Logf("M6: %s killed; started again after %s, listening %s later; %s served again through every front %s after its start; %d sessions begun while it was down held and served after %v; %d samples, %d with a branch running twice",
		victim.name, returned.Sub(killed).Round(time.Millisecond), listening.Round(time.Millisecond), mine[0],
		served.Round(time.Millisecond), len(held), roundAll(held), samples, len(bad))
	checkNodeBack(t, ctx, c, victim, old, epoch, mine)
	return served
}

// checkNodeBack checks a node started again after a kill: none of the killed
// run's postmasters is left, every postmaster and mount under its state
// directory is a running branch's, it registered at the next epoch, and its
// branches are its own at that epoch and serve their data.
func checkNodeBack(t *testing.T, ctx context.Context, c *cluster, n *member, old []instance, epoch int64, mine []string) {
	t.Helper()
	now := postmastersOf(t, c, n)
	for _, o := range old {
		if slices.ContainsFunc(now, func(i instance) bool { return i.pid == o.pid }) {
			t.Errorf("postmaster %d of the killed run of %s still runs after its restart", o.pid, n.name)
		}
	}
	list := n.branches(t)
	running := map[int]bool{}
	for _, b := range list {
		if b.State == "running" {
			running[b.PID] = true
		}
	}
	for _, i := range now {
		if !running[i.pid] {
			t.Errorf("postmaster %d on branch %d of %s is no running branch's", i.pid, i.branch, n.name)
		}
	}
	mounts := mountsUnder(n.state)
	if len(mounts) != len(running) {
		t.Errorf("%s has %d mounts for %d running branches: %v", n.name, len(mounts), len(running), mounts)
	}
	t.Logf("M6 after the restart: the killed run's %d postmasters gone; %d running branches, %d postmasters, %d mounts on %s",
		len(old), len(running), len(now), len(mounts), n.name)
	if e, state := c.cat.node(t, n.name); e != epoch+1 || state != "active" {
		t.Errorf("%s after its restart: epoch %d %s, want %d active", n.name, e, state, epoch+1)
	}
	for _, b := range mine {
		row, _ := c.cat.branch(t, b)
		if row.node != n.name || row.epoch != epoch+1 {
			t.Errorf("branch %s after the restart: node %s epoch %d, want %s %d", b, row.node, row.epoch, n.name, epoch+1)
		}
		if v, err := c.read(ctx, c.fronts[2], b); err != nil || v != b {
			t.Errorf("branch %s after the restart: %q %v", b, v, err)
		}
	}
}

// postmastersOf lists the branch servers under node n's state directory.
func postmastersOf(t *testing.T, c *cluster, n *member) []instance {
	t.Helper()
	in, err := instances(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []instance
	for _, i := range in {
		if i.node == n.host.name {
			out = append(out, i)
		}
	}
	return out
}

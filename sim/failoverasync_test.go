package sim

import (
	"context"
	"testing"
	"time"
)

// failoverAsync: replication asynchronous and the link between the two
// catalog hosts cut (blackhole routes both ways), so that what the primary
// commits from then on never reaches the standby. While it is cut, node-2 is
// started again (it registers at a new epoch and adopts its rows) and a new
// name is created through a front (its row, and its node's instance). Then the
// primary is killed, the link healed and the standby promoted: the catalog has
// node-2 at its old epoch and no row for the new name, which a node runs. Nodes
// and fronts are not restarted. Node-2 must register again above the epoch it
// held and serve on; the new name's node must stop its instance and remove its
// mount and directory; asked for again, the name is created from the seed; the
// rows made before the cut are all there; once every janitor has run, no node
// is declared dead and no name ran twice. Reported: the create downtime, how
// long after the kill the orphan was gone and node-2 registered again.
func failoverAsync(t *testing.T, ctx context.Context, c *cluster, standby *catalogServer, deadAfter time.Duration) {
	primary, victim := c.cat, c.nodes[1]
	on := branchesOn(t, ctx, c, "m10a", 1)
	healed := false
	heal := func() {
		if !healed {
			healed = true
			c.net.unblackhole(primary.host, standby.host)
			c.net.unblackhole(standby.host, primary.host)
		}
	}
	defer heal()
	for _, hs := range [][2]*host{{primary.host, standby.host}, {standby.host, primary.host}} {
		if err := c.net.blackhole(hs[0], hs[1]); err != nil {
			t.Fatal(err)
		}
	}
	standbyEpoch, _ := primary.node(t, victim.name)
	victim.stop(t)
	victim.start(t)
	held, _ := primary.node(t, victim.name)
	if err := c.write(ctx, c.fronts[0], "m10-orphan", "written before the failover"); err != nil {
		t.Fatalf("create m10-orphan: %v%s", err, c.logs())
	}
	orphan, _ := primary.branch(t, "m10-orphan")
	holder := c.nodeByID(t, orphan.node)
	if n := standby.count(t, "SELECT count(*) FROM branches WHERE name = 'm10-orphan'"); n != 0 {
		t.Fatalf("the standby has m10-orphan's row although the link was cut (received up to %s, primary at %s)",
			standby.lsn(t, ctx, true), primary.lsn(t, ctx, false))
	}
	if e, _ := standby.node(t, victim.name); e != standbyEpoch {
		t.Fatalf("the standby has %s at epoch %d although the link was cut, want %d", victim.name, e, standbyEpoch)
	}
	sizes := map[string]int64{}
	for _, n := range c.nodes {
		sizes[n.name] = logSize(n)
	}
	smp := startNameSampler(c)
	// A front serves a running branch through a catalog outage by the route it
	// cached: the probe runs a while first, as M9's do.
	keep := c.startProbe(c.fronts[0], on[c.nodes[0].name][0], on[c.nodes[0].name][0])
	defer keep.stop()
	time.Sleep(baseline)

	down := time.Now()
	primary.crash(t)
	heal()
	standby.promote(t, ctx)
	promoted := time.Since(down)
	c.cat = standby
	created, tries, first := createAgain(t, ctx, c, "m10-async-new", down)
	eventually(t, time.Minute, "m10-orphan's instance on "+holder.name+" removed", func() bool { return orphanGone(t, c, holder, orphan.id) })
	orphanAt := time.Since(down)
	eventually(t, 30*time.Second, victim.name+" registered again", func() bool {
		e, state := c.cat.node(t, victim.name)
		return e > held && state == "active"
	})
	reregAt := time.Since(down)
	again, _, _ := createAgain(t, ctx, c, "m10-orphan", time.Now())
	checkedAt := down.Add(promoted + deadAfter + janitorPass + time.Second)
	time.Sleep(time.Until(checkedAt))
	keep.stop()
	samples, unnamed, bad := smp.stop()

	checkAsync(t, c, victim, holder, on, sizes, held)
	for _, a := range keep.failures() {
		t.Errorf("%s through %s %s after the kill: %v", keep.branch, keep.front.name, a.at.Sub(down).Round(time.Millisecond), a.err)
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d samples found a branch or a name running twice: %v", len(bad), samples, bad)
	}
	epoch, _ := c.cat.node(t, victim.name)
	t.Logf("M10 async: standby promoted %s after the kill; a new name served %s after it (%d tries, the first answered %q); m10-orphan (id %d on %s) had no row, its instance gone %s after the kill; %s, which held epoch %d (the catalog had %d), registered again at %d %s after the kill, not restarted; m10-orphan served from the seed %s after it was asked for again; %d samples (%d not named), %d with a branch or name running twice; new connections to %s: %s",
		promoted.Round(time.Millisecond), created.Round(time.Millisecond), tries, first, orphan.id, holder.name, orphanAt.Round(time.Millisecond),
		victim.name, held, standbyEpoch, epoch, reregAt.Round(time.Millisecond), again.Round(time.Millisecond), samples, unnamed, len(bad),
		keep.branch, keep.summary(time.Time{}, time.Now()))
}

// checkAsync checks the cluster after the asynchronous failover: the rows made
// before the cut are there and not lost, every node is active and none exited
// (victim at an epoch above held), the holder logged the orphan's removal and
// victim its registration made again (their logs since sizes).
func checkAsync(t *testing.T, c *cluster, victim, holder *member, on map[string][]string, sizes map[string]int64, held int64) {
	t.Helper()
	for _, names := range on {
		for _, name := range names {
			if row, ok := c.cat.branch(t, name); !ok || row.state == "lost" {
				t.Errorf("%s after the failover: row %v %+v, want it there, not lost", name, ok, row)
			}
		}
	}
	for _, n := range c.nodes {
		e, state := c.cat.node(t, n.name)
		if state != "active" || n == victim && e <= held {
			t.Errorf("%s after the failover: epoch %d %s, want active (%s above %d)", n.name, e, state, victim.name, held)
		}
		if !n.running() {
			t.Errorf("%s exited after the failover:\n%s", n.name, n.tail())
		}
	}
	if !nodeLogSays(holder, sizes[holder.name], "removing a branch whose catalog row is gone") {
		t.Errorf("%s did not log the orphan's removal:\n%s", holder.name, holder.tail())
	}
	if !nodeLogSays(victim, sizes[victim.name], "the catalog had lost this node's registration") {
		t.Errorf("%s did not log its registration made again:\n%s", victim.name, victim.tail())
	}
}

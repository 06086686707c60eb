package sim

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// testCatalogCut is M11: node victim cut from the catalog alone, by a blackhole
// route to the catalog's address on its host (its connects to the catalog fail,
// what it sends on its open connections is lost), while the fronts and the
// other node still reach it and the catalog. Its branch m11-<n> is read by an
// established session through the first front and by a new client per front
// every 100 ms; the other node's branch by a new client per front.
//
// Short (long false): the route is removed as soon as the victim's lease has
// run out, well within --node-dead-after: the victim must keep its
// registration (same epoch, active) and its branch be served again through
// every front. Long: the route stays until the catalog declares the victim
// dead; once it can reach the catalog again the victim must stop its branch
// servers and exit with 75, having written nothing to the catalog since, and,
// started again, register at a higher epoch, its branch lost (57P03 through
// every front). Either way every client of its branch is served or told
// 57P03, the other node's branch never fails, and at every 100 ms sample no
// branch and no name runs twice.
func testCatalogCut(t *testing.T, ctx context.Context, c *cluster, victim, other *member, long bool, deadAfter time.Duration) {
	kind := "short"
	if long {
		kind = "long"
	}
	mine, theirs := "m11-"+kind, "m11-"+kind+"-other"
	branchOnNode(t, ctx, c, victim, mine)
	branchOnNode(t, ctx, c, other, theirs)
	for _, f := range c.fronts {
		if v, err := c.read(ctx, f, mine); err != nil || v != mine {
			t.Fatalf("%s through %s before the cut: %q %v", mine, f.name, v, err)
		}
	}
	epoch, _ := c.cat.node(t, victim.name)
	held, err := c.startLoad(ctx, c.fronts[0], mine)
	if err != nil {
		t.Fatal(err)
	}
	defer held.stop()
	smp := startNameSampler(c)
	var vp, op []*probe
	for _, f := range c.fronts {
		vp = append(vp, c.startProbe(f, mine, mine))
		op = append(op, c.startProbe(f, theirs, theirs))
	}
	time.Sleep(time.Second)

	cut := time.Now()
	if err := c.net.blackhole(victim.host, c.cat.host); err != nil {
		t.Fatal(err)
	}
	healed := false
	defer func() {
		if !healed {
			c.net.unblackhole(victim.host, c.cat.host)
		}
	}()
	leaseOut := waitLeaseOut(t, c, victim.name, 30*time.Second)
	var (
		deadAt time.Time
		view   catalogView
	)
	if long {
		deadAt = waitDead(t, c, victim.name, time.Minute)
		view = viewOf(t, c, victim.name)
		view.allLost(t, c, victim.name)
		lostError(t, ctx, c, mine, "while its node was cut from the catalog and dead")
	}
	heal := time.Now()
	if err := c.net.unblackhole(victim.host, c.cat.host); err != nil {
		t.Fatal(err)
	}
	healed = true
	var back string
	if long {
		exited := exitAfterLoss(t, c, victim, heal)
		for _, d := range view.changedSince(t, c, victim.name) {
			t.Errorf("catalog written after %s was declared dead: %s", victim.name, d)
		}
		listening := startAgain(t, c, victim, epoch)
		lostError(t, ctx, c, mine, "after its node started again")
		back = fmt.Sprintf("declared dead %s after the cut; exited with 75 %s after the heal; started again, listening %s later at a higher epoch, %s lost",
			deadAt.Sub(cut).Round(time.Millisecond), exited.Round(time.Millisecond), listening.Round(time.Millisecond), mine)
	} else {
		var served time.Duration
		for _, p := range vp {
			eventually(t, 30*time.Second, mine+" served again through "+p.front.name, func() bool {
				_, ok := p.first(heal, "ok")
				return ok
			})
			a, _ := p.first(heal, "ok")
			served = max(served, a.at.Add(a.took).Sub(heal))
		}
		// A heartbeat or two after the heal, so that a lost registration would show.
		time.Sleep(nodeBeat)
		if e, state := c.cat.node(t, victim.name); e != epoch || state != "active" {
			t.Errorf("%s after a short cut from the catalog: epoch %d %s, want %d active (the same registration)", victim.name, e, state, epoch)
		}
		back = fmt.Sprintf("same registration after the heal; %s served through every front %s after it", mine, served.Round(time.Millisecond))
	}
	stopped := time.Now()
	for _, p := range append(vp, op...) {
		p.stop()
	}
	samples, unnamed, bad := smp.stop()

	for _, p := range vp {
		for _, a := range p.failures() {
			if a.code() != "57P03" {
				t.Errorf("%s through %s %s after the cut: %v, want it served or 57P03", mine, p.front.name, a.at.Sub(cut).Round(time.Millisecond), a.err)
			}
		}
		during := "begun during the cut " + p.summary(cut, heal)
		if long {
			during = "begun during the cut, before it was declared dead " + p.summary(cut, deadAt) + ", after " + p.summary(deadAt, heal)
		}
		t.Logf("M11 %s %s (cut node) through %s: before %s; %s; after the heal %s; errors: %s", kind, mine, p.front.name,
			p.summary(time.Time{}, cut), during, p.summary(heal, stopped), p.errorsSeen(time.Time{}, stopped))
	}
	for _, p := range op {
		for _, a := range p.failures() {
			t.Errorf("%s (other node) through %s %s after the cut: %v", theirs, p.front.name, a.at.Sub(cut).Round(time.Millisecond), a.err)
		}
		t.Logf("M11 %s %s (other node) through %s: %s", kind, theirs, p.front.name, p.summary(time.Time{}, stopped))
	}
	heldAt, heldErr := held.failure()
	heldEnd := fmt.Sprintf("read on, %.0f reads/s before the cut, %.0f during", held.rate(cut.Add(-time.Second), cut), held.rate(cut, heal))
	if heldErr != nil {
		heldEnd = fmt.Sprintf("ended %s after the cut: %v", heldAt.Sub(cut).Round(time.Millisecond), heldErr)
	}
	if heldErr != nil && !long {
		t.Errorf("the session held on %s through %s %s", mine, held.front.name, heldEnd)
	}
	held.stop()
	if len(bad) > 0 {
		t.Errorf("%d of %d samples found a branch or a name running twice: %v", len(bad), samples, bad)
	}
	t.Logf("M11 %s: %s cut from the catalog for %s with --node-dead-after %s; its lease ran out %s after the cut; %s; the session held on %s %s; %d samples (%d unnamed), %d with a branch or name running twice",
		kind, victim.name, heal.Sub(cut).Round(time.Millisecond), deadAfter, leaseOut.Sub(cut).Round(time.Millisecond), back, mine, heldEnd, samples, unnamed, len(bad))
	destroyAll(t, ctx, c, map[string][]string{victim.name: {mine}, other.name: {theirs}})
}

package sim

import (
	"context"
	"testing"
	"time"
)

// testFrozenNode is M8: node victim, started in a freezer cgroup of its own
// with its branch servers, is frozen, the whole host at once, until the other
// node's janitor declares it dead (the nodes run with a short
// --node-dead-after), then thawed.
//
// It holds four branches, all running: m8-plain, m8-eph, m8-reset and
// m8-held, on which a session through the first front is open across the
// freeze (its next query, once the node has exited, must fail). While it is frozen and dead, a plain client of m8-plain gets 57P03
// "the branch was on a lost node" through every front. Thawed, it must learn
// that it was declared dead, stop every branch server, unmount and exit with
// 75, having written nothing to the catalog since the janitor's verdict (its
// node row and branch rows as the janitor left them, all lost, and no
// transition of its branches since). Then, before it is started again (the
// harness is its supervisor), a client of m8-eph with the ephemeral option and
// one of m8-reset with the reset option are served the seed's row on the other
// node with a NOTICE; started again, it registers at a higher epoch, and
// m8-plain is still lost. At every 100 ms sample no branch and no branch name
// runs twice, and the other node's branch, probed through every front, never
// fails.
func testFrozenNode(t *testing.T, ctx context.Context, c *cluster, victim, other *member, deadAfter time.Duration) {
	fz := newFreezer(t, victim.host.name)
	victim.stop(t)
	victim.freezer = fz
	victim.start(t)
	defer func() { victim.freezer = nil }()
	defer fz.thaw() // a failed step leaves nothing frozen for the cleanups

	mine := []string{"m8-plain", "m8-eph", "m8-reset", "m8-held"}
	for _, name := range mine {
		branchOnNode(t, ctx, c, victim, name)
	}
	theirs := "m8-other"
	branchOnNode(t, ctx, c, other, theirs)
	held, err := c.connect(ctx, c.fronts[0], "app@m8-held")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close(context.Background())
	for _, i := range postmastersOf(t, c, victim) {
		if !fz.holds(i.pid) {
			t.Fatalf("postmaster %d of %s is not in its freezer cgroup", i.pid, victim.name)
		}
	}
	epoch, _ := c.cat.node(t, victim.name)
	smp := startNameSampler(c)
	var probes, vp []*probe
	for _, f := range c.fronts {
		probes = append(probes, c.startProbe(f, theirs, theirs))
		vp = append(vp, c.startProbe(f, "m8-plain", "m8-plain"))
	}
	time.Sleep(500 * time.Millisecond)

	frozen := time.Now()
	if err := fz.freeze(); err != nil {
		t.Fatal(err)
	}
	leaseOut := waitLeaseOut(t, c, victim.name, 30*time.Second)
	dead := waitDead(t, c, victim.name, time.Minute)
	view := viewOf(t, c, victim.name)
	view.allLost(t, c, victim.name)
	lostError(t, ctx, c, "m8-plain", "while its node was frozen and dead")
	thawed := time.Now()
	if err := fz.thaw(); err != nil {
		t.Fatal(err)
	}
	exited := exitAfterLoss(t, c, victim, thawed)
	_, heldErr := held.Exec(ctx, "SELECT 1")
	for _, d := range view.changedSince(t, c, victim.name) {
		t.Errorf("catalog written after %s was declared dead: %s", victim.name, d)
	}
	lostError(t, ctx, c, "m8-plain", "while its node was down")
	eph := recreated(t, ctx, c, "m8-eph", ephemeralOn, victim.name)
	reset := recreated(t, ctx, c, "m8-reset", resetOn, victim.name)
	victim.freezer = nil
	listening := startAgain(t, c, victim, epoch)
	lostError(t, ctx, c, "m8-plain", "after its node started again")
	for _, p := range append(vp, probes...) {
		p.stop()
	}
	samples, unnamed, bad := smp.stop()
	for _, p := range vp {
		for _, a := range p.failures() {
			if a.code() != "57P03" {
				t.Errorf("m8-plain through %s %s after the freeze: %v, want it served or 57P03", p.front.name, a.at.Sub(frozen).Round(time.Millisecond), a.err)
			}
		}
		t.Logf("M8 m8-plain (frozen node) through %s: before %s; begun while frozen, before it was declared dead %s, after %s; after the thaw %s; errors: %s",
			p.front.name, p.summary(time.Time{}, frozen), p.summary(frozen, dead), p.summary(dead, thawed), p.summary(thawed, time.Now()),
			p.errorsSeen(time.Time{}, time.Now()))
	}

	for _, p := range probes {
		for _, a := range p.failures() {
			t.Errorf("%s (other node) through %s at %s: %v", theirs, p.front.name, a.at.Sub(frozen).Round(time.Millisecond), a.err)
		}
		t.Logf("M8 %s (other node) through %s: %s", theirs, p.front.name, p.summary(time.Time{}, time.Now()))
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d samples found a branch or a name running twice: %v", len(bad), samples, bad)
	}
	if heldErr == nil {
		t.Errorf("the session held on m8-held across the freeze still ran a query after %s stopped its branch servers", victim.name)
	}
	t.Logf("M8: %s frozen with --node-dead-after %s: lease out %s after the freeze, declared dead %s after it (%d branches lost); thawed after %s; exited with 75 %s after the thaw; the session held on m8-held across the freeze got %q at its next query; m8-eph (ephemeral) and m8-reset (reset) served from the seed on %s %s and %s after their clients asked; started again, listening %s later at a higher epoch; %d samples (%d unnamed), %d with a branch or name running twice",
		victim.name, deadAfter, leaseOut.Sub(frozen).Round(time.Millisecond), dead.Sub(frozen).Round(time.Millisecond), len(view.rows),
		thawed.Sub(frozen).Round(time.Millisecond), exited.Round(time.Millisecond), message(heldErr), other.name,
		eph.Round(time.Millisecond), reset.Round(time.Millisecond), listening.Round(time.Millisecond), samples, unnamed, len(bad))
	eventually(t, 15*time.Second, "m8-eph, ephemeral, destroyed after its session", func() bool {
		_, ok := c.cat.branch(t, "m8-eph")
		return !ok
	})
	destroyAll(t, ctx, c, map[string][]string{victim.name: {"m8-plain", "m8-held"}, other.name: {"m8-reset", theirs}})
}

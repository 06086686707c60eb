package sim

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// testDiskLoss is M7: node victim dies with its disk: the agent and every
// branch server killed with SIGKILL, its mounts detached and its state
// directory removed, as a host that is gone for good. It holds m7-named and
// m7-eph, running; the other node holds m7-other, read by an established
// session and probed through every front throughout.
//
// The other node's janitor must declare it dead (lease, then the nodes' short
// --node-dead-after); then a plain client of m7-named gets 57P03 "the branch
// was on a lost node" through every front, a client of m7-eph with the
// ephemeral option is served the seed's row on the other node with a NOTICE,
// and new names go to the other node only. Started again on an empty state
// directory, as a replacement host with the same cluster name, the victim
// registers at a higher epoch under the same node id, copies the seed again,
// and m7-named stays lost. The other node's branch never fails and no branch or
// name runs twice. Reported: time to dead, the ephemeral recreation's latency,
// the other node's session's reads per second before and after.
func testDiskLoss(t *testing.T, ctx context.Context, c *cluster, victim, other *member, deadAfter time.Duration) {
	for _, name := range []string{"m7-named", "m7-eph"} {
		branchOnNode(t, ctx, c, victim, name)
	}
	theirs := "m7-other"
	branchOnNode(t, ctx, c, other, theirs)
	load, err := c.startLoad(ctx, c.fronts[2], theirs)
	if err != nil {
		t.Fatal(err)
	}
	defer load.stop()
	epoch, _ := c.cat.node(t, victim.name)
	smp := startNameSampler(c)
	var probes []*probe
	for _, f := range c.fronts {
		probes = append(probes, c.startProbe(f, theirs, theirs))
	}
	time.Sleep(3 * time.Second)

	killed := time.Now()
	pms := postmastersOf(t, c, victim)
	victim.kill9()
	for _, i := range pms {
		syscall.Kill(i.pid, syscall.SIGKILL)
	}
	eventually(t, 30*time.Second, victim.name+"'s postmasters gone", func() bool { return len(postmastersOf(t, c, victim)) == 0 })
	mps := mountsUnder(victim.state)
	for i := len(mps) - 1; i >= 0; i-- {
		if err := syscall.Unmount(mps[i], syscall.MNT_DETACH); err != nil {
			t.Fatalf("detach %s: %v", mps[i], err)
		}
	}
	if err := os.RemoveAll(victim.state); err != nil {
		t.Fatal(err)
	}
	wiped := time.Since(killed)
	declared := waitDead(t, c, victim.name, time.Minute)
	lostError(t, ctx, c, "m7-named", "after its node died with its disk")
	eph := recreated(t, ctx, c, "m7-eph", ephemeralOn, victim.name)
	var fresh []string
	for i := range 2 * len(c.fronts) {
		name := fmt.Sprintf("m7-new-%d", i)
		if err := c.write(ctx, c.fronts[i%len(c.fronts)], name, name); err != nil {
			t.Fatalf("new name %s with %s dead: %v", name, victim.name, err)
		}
		if row, _ := c.cat.branch(t, name); row.node != other.name {
			t.Errorf("new name %s with %s dead: placed on %s, want %s", name, victim.name, row.node, other.name)
		}
		fresh = append(fresh, name)
	}
	// The other node's session, once the recreation and the new names are done.
	steady := time.Now()
	time.Sleep(3 * time.Second)

	listening := startAgain(t, c, victim, epoch)
	copied := c.waitSeeds(t)
	lostError(t, ctx, c, "m7-named", "after its node started again on an empty disk")
	for _, p := range probes {
		p.stop()
	}
	samples, unnamed, bad := smp.stop()
	for _, p := range probes {
		for _, a := range p.failures() {
			t.Errorf("%s (other node) through %s at %s: %v", theirs, p.front.name, a.at.Sub(killed).Round(time.Millisecond), a.err)
		}
		t.Logf("M7 %s (other node) through %s: %s", theirs, p.front.name, p.summary(time.Time{}, time.Now()))
	}
	if at, err := load.failure(); err != nil {
		t.Errorf("the session on %s failed %s after %s was killed: %v", theirs, at.Sub(killed).Round(time.Millisecond), victim.name, err)
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d samples found a branch or a name running twice: %v", len(bad), samples, bad)
	}
	t.Logf("M7: %s killed with its %d branch servers, mounts and state directory gone %s later; declared dead %s after the kill (--node-dead-after %s); m7-eph (ephemeral) served from the seed on %s %s after its client asked; %d new names all placed on %s; the session on %s read %.0f/s in the 3 s before the kill, %.0f/s in 3 s once they were made; started again on an empty disk, listening %s later at a higher epoch, holding the seed again %s after; %d samples (%d unnamed), %d with a branch or name running twice",
		victim.name, len(pms), wiped.Round(time.Millisecond), declared.Sub(killed).Round(time.Millisecond), deadAfter, other.name, eph.Round(time.Millisecond),
		len(fresh), other.name, theirs, load.rate(killed.Add(-3*time.Second), killed), load.rate(steady, steady.Add(3*time.Second)),
		listening.Round(time.Millisecond), copied.Round(time.Millisecond), samples, unnamed, len(bad))
	load.stop()
	eventually(t, 15*time.Second, "m7-eph, ephemeral, destroyed after its session", func() bool {
		_, ok := c.cat.branch(t, "m7-eph")
		return !ok
	})
	destroyAll(t, ctx, c, map[string][]string{victim.name: {"m7-named"}, other.name: append(fresh, theirs)})
}

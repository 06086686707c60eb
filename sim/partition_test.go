package sim

import (
	"context"
	"sync"
	"testing"
	"time"
)

// testPartition cuts one node's link (its veth down: no host reaches it and it
// reaches none, the catalog included, and nothing answers the packets sent to
// it) for longer than a front waits for an away node (10 s) and than the node's
// lease (6 s). A probe per front reads one of its branches and one of the other
// node's, and a new client per front connects to its branch after the cut.
// Every front must answer 57P03 for its branch, and nothing else, while the link
// is down; the other node's branch must not fail once; once the link
// is back, its branch must be served again through every front, by the same
// registration (the partition is shorter than --node-dead-after), and no
// sample may find a branch running twice.
func testPartition(t *testing.T, ctx context.Context, c *cluster, on map[string][]string) {
	victim, other := c.nodes[0], c.nodes[1]
	mine, theirs := on[victim.name][0], on[other.name][0]
	for _, b := range []string{mine, theirs} {
		if v, err := c.read(ctx, c.fronts[0], b); err != nil || v != b {
			t.Fatalf("wake %s before the partition: %q %v", b, v, err)
		}
	}
	epoch, _ := c.cat.node(t, victim.name)
	smp := startSampler(c.dir)
	var vp, op []*probe
	for _, f := range c.fronts {
		vp = append(vp, c.startProbe(f, mine, mine))
		op = append(op, c.startProbe(f, theirs, theirs))
	}
	time.Sleep(300 * time.Millisecond)

	// The partition begins when the link is down, that is when cut returns: a
	// probe's attempt begun while the ip command ran (a fork and exec, which can
	// take a few hundred milliseconds on a loaded machine) may still be served.
	cutting := time.Now()
	if err := c.net.cut(victim.host); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	t.Logf("partition: the link of %s went down in %s", victim.name, cut.Sub(cutting).Round(time.Millisecond))
	healed := false
	defer func() {
		if !healed {
			c.net.heal(victim.host)
		}
	}()
	// One new client per front, begun after the cut (a probe's session in flight
	// at the cut may hang on the silent link for longer): a front waits up to 10 s
	// for a node that is away, then answers 57P03. The node's lease runs out
	// meanwhile (it cannot renew it).
	waits := make([]time.Duration, len(c.fronts))
	errs := make([]error, len(c.fronts))
	var wg sync.WaitGroup
	for i, f := range c.fronts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			_, errs[i] = c.read(ctx, f, mine)
			waits[i] = time.Since(start)
		}()
	}
	expired := eventually(t, 30*time.Second, victim.name+"'s lease to run out", func() bool {
		return c.cat.count(t, "SELECT count(*) FROM nodes WHERE id = $1 AND lease_until < (extract(epoch FROM now()) * 1e9)::bigint", victim.name) == 1
	})
	wg.Wait()
	for i, err := range errs {
		if sqlstate(err) != "57P03" {
			t.Errorf("%s through %s while its node was cut off: %v, want 57P03", mine, c.fronts[i].name, err)
		}
	}
	healAt := time.Now()
	if err := c.net.heal(victim.host); err != nil {
		t.Fatal(err)
	}
	healed = true
	var served time.Duration
	for _, p := range vp {
		eventually(t, 60*time.Second, mine+" served again through "+p.front.name, func() bool {
			_, ok := p.first(healAt, "ok")
			return ok
		})
		a, _ := p.first(healAt, "ok")
		served = max(served, a.at.Add(a.took).Sub(healAt))
	}
	stopped := time.Now()
	for _, p := range append(vp, op...) {
		p.stop()
	}
	samples, bad := smp.stop()

	for _, p := range vp {
		for _, a := range p.attempts() {
			during := a.at.After(cut) && a.at.Add(a.took).Before(healAt)
			// One begun while the link went down may have been in flight when it
			// did: like a probe's session in flight at the cut, it is not checked.
			if during && a.code() != "57P03" {
				t.Errorf("%s through %s during the partition (begun %s after the cut, took %s): %s (%v), want 57P03",
					mine, p.front.name, a.at.Sub(cut).Round(time.Millisecond), a.took.Round(time.Millisecond), a.code(), a.err)
			}
		}
		t.Logf("partition: %s (cut node) through %s: cut %s; after the heal %s", mine, p.front.name,
			p.summary(cutting, healAt), p.summary(healAt, stopped))
	}
	for _, p := range op {
		for _, a := range p.failures() {
			t.Errorf("%s (other node) through %s at %s: %v", theirs, p.front.name, a.at.Sub(cut).Round(time.Millisecond), a.err)
		}
		t.Logf("partition: %s (other node) through %s: %s", theirs, p.front.name, p.summary(time.Time{}, stopped))
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d samples found a branch running twice: %v", len(bad), samples, bad)
	}
	if e, state := c.cat.node(t, victim.name); e != epoch || state != "active" {
		t.Errorf("%s after the partition: epoch %d %s, want %d active (the same registration)", victim.name, e, state, epoch)
	}
	t.Logf("partition: %s cut for %s; its lease ran out %s after the cut; each front answered a client that came after the cut 57P03 after holding it %v; served again through every front %s after the heal; %d samples, %d with a branch running twice",
		victim.name, healAt.Sub(cut).Round(time.Millisecond), expired.Round(time.Millisecond), roundAll(waits),
		served.Round(time.Millisecond), samples, len(bad))
}

package sim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// raceClients is how many clients race for one new name (the design's M3).
const raceClients = 50

// testRace is M3: raceClients clients, released at once, connect to one new name
// through the fronts in turn (as a load balancer spreads them) and read from it,
// reps times. Each time every client must be served the seed's row, and exactly
// one branch must have been created: one catalog row, one creation in the
// catalog's transitions, one creation counted by the nodes, one node listing it,
// one postmaster. The branch is destroyed after each repetition.
func testRace(t *testing.T, ctx context.Context, c *cluster, reps int) {
	var all []time.Duration
	perNode := map[string]int{}
	for rep := range reps {
		name := fmt.Sprintf("race-%d", rep)
		before := 0
		for _, n := range c.nodes {
			before += n.creates(t)
		}
		waits, errs := raceOnce(ctx, c, name)
		for _, err := range errs {
			t.Errorf("%s: %v", name, err)
		}
		if len(errs) > 0 {
			t.Fatalf("%s: %d of %d clients served%s", name, raceClients-len(errs), raceClients, c.logs())
		}
		row, ok := c.cat.branch(t, name)
		if !ok {
			t.Fatalf("%s: no catalog row after %d clients were served", name, raceClients)
		}
		if n := c.cat.count(t, "SELECT count(*) FROM transitions WHERE source = 'app' AND branch = $1 AND from_state = ''", name); n != 1 {
			t.Errorf("%s: %d creations in the catalog's transitions, want 1", name, n)
		}
		after := 0
		owners := 0
		for _, n := range c.nodes {
			after += n.creates(t)
			if _, ok := n.branches(t)[name]; ok {
				owners++
			}
		}
		if after-before != 1 || owners != 1 {
			t.Errorf("%s: the nodes counted %d creations and %d of them list it, want 1 and 1", name, after-before, owners)
		}
		in, err := instances(c.dir)
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, i := range in {
			if i.branch == row.id {
				running++
			}
		}
		if running != 1 {
			t.Errorf("%s: %d postmasters run branch %d, want 1", name, running, row.id)
		}
		perNode[row.node]++
		t.Logf("M3 %s: %d/%d served, created on %s, wait p50 %s p95 %s max %s", name, len(waits), raceClients, row.node,
			percentile(waits, 50).Round(time.Millisecond), percentile(waits, 95).Round(time.Millisecond),
			percentile(waits, 100).Round(time.Millisecond))
		all = append(all, waits...)
		c.nodeByID(t, row.node).cli(t, "branch", "destroy", name, "--source", "app")
	}
	t.Logf("M3 summary: %d repetitions x %d clients through %d fronts, all served, one creation each; created per node %v; wait p50 %s p95 %s max %s",
		reps, raceClients, len(c.fronts), perNode, percentile(all, 50).Round(time.Millisecond),
		percentile(all, 95).Round(time.Millisecond), percentile(all, 100).Round(time.Millisecond))
}

// raceOnce releases raceClients clients at once on the new branch name and
// returns the waits (connect to first row) of those served and the errors of
// the others.
func raceOnce(ctx context.Context, c *cluster, name string) ([]time.Duration, []error) {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		waits   []time.Duration
		errs    []error
		release = make(chan struct{})
	)
	for i := range raceClients {
		f := c.fronts[i%len(c.fronts)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-release
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			v, err := c.read(cctx, f, name)
			cancel()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("client %d through %s: %w", i, f.name, err))
			case v != "seed":
				errs = append(errs, fmt.Errorf("client %d through %s read %q, want the seed's", i, f.name, v))
			default:
				waits = append(waits, time.Since(start))
			}
		}()
	}
	close(release)
	wg.Wait()
	return waits, errs
}

package sim

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestSmoke is `make sim-smoke`: one catalog, two nodes and three fronts on
// hosts of their own, and the scenarios of the design's section 10 that apply
// today, one after the other on the same cluster (each starts again whatever a
// failed one left stopped). SIM_RACE_REPS sets M3's repetitions (default 10),
// SIM_KILL_REPS M6's (default 1; the nodes take turns).
func TestSmoke(t *testing.T) {
	reps, kills := repetitions(t, "SIM_RACE_REPS", 10), repetitions(t, "SIM_KILL_REPS", 1)
	// Every wait is bounded on its own; this ends whatever is left well before
	// go test's -timeout, so that the cleanups run.
	deadline := time.Now().Add(10 * time.Minute)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	t.Logf("machine: %s", machineLine())
	start := time.Now()
	c := startCluster(t, ctx, 2, 3)
	t.Logf("cluster up in %s: a catalog, %d nodes, %d fronts; every node held the source's seed %s after the fronts started",
		time.Since(start).Round(time.Millisecond), len(c.nodes), len(c.fronts), c.seedsCopied.Round(time.Millisecond))

	scenario := func(name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			c.restartStopped(t)
			begin := time.Now()
			f(t)
			t.Logf("%s took %s", name, time.Since(begin).Round(time.Millisecond))
		})
	}
	scenario("M3Race", func(t *testing.T) { testRace(t, ctx, c, reps) })
	scenario("M5FrontKilledDuringCreate", func(t *testing.T) { testFrontKillDuringCreate(t, ctx, c, len(c.fronts)) })
	scenario("M4FanOut", func(t *testing.T) { testFanOut(t, ctx, c) })
	scenario("M12CancelElsewhere", func(t *testing.T) { testCancelElsewhere(t, ctx, c, branchesOn(t, ctx, c, "m12", 1)) })
	var on map[string][]string
	scenario("Branches", func(t *testing.T) { on = branchesOn(t, ctx, c, "b", 2) })
	if t.Failed() {
		return
	}
	scenario("FrontKilledMidSession", func(t *testing.T) { testFrontKillMidSession(t, ctx, c, on[c.nodes[0].name][1]) })
	var served []time.Duration
	for i := range kills {
		victim, other := c.nodes[(i+1)%2], c.nodes[i%2]
		scenario("M6NodeKilled", func(t *testing.T) { served = append(served, testNodeKill(t, ctx, c, on, victim, other)) })
	}
	t.Logf("M6 summary: %d kills, served again through every front after the node's start: p50 %s max %s (target %s)", len(served),
		percentile(served, 50).Round(time.Millisecond), percentile(served, 100).Round(time.Millisecond), servedAgainTarget)
	scenario("Partition", func(t *testing.T) { testPartition(t, ctx, c, on) })
	scenario("M13SessionsThroughSeveralFronts", func(t *testing.T) { testSharedBranch(t, ctx, c) })
	t.Logf("simulation took %s; machine at the end: %s", time.Since(start).Round(time.Millisecond), machineLine())
}

// repetitions reads a positive count from the environment variable name.
func repetitions(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

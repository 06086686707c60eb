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
// SIM_KILL_REPS M6's (default 1; the nodes take turns), SIM_CATALOG_STOP M9's
// outage (default 10s); SIM_LONG=1 adds M4's fan-out, M11's cuts, M7 and M10
// (the catalog's failover to a standby; `-run '^TestSmoke$/M10'` runs it alone
// on a new cluster), which `make sim` runs and `make sim-smoke` does not (M4's
// 30 creations and the cuts are the heaviest on two cores, beside the
// integration suite in `make test`).
func TestSmoke(t *testing.T) {
	reps, kills := repetitions(t, "SIM_RACE_REPS", 10), repetitions(t, "SIM_KILL_REPS", 1)
	outage, long := duration(t, "SIM_CATALOG_STOP", 10*time.Second), os.Getenv("SIM_LONG") == "1"
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
	if long {
		scenario("M4FanOut", func(t *testing.T) { testFanOut(t, ctx, c) })
	}
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
	// The failure scenarios run the nodes with a short --node-dead-after, and
	// come last: M11's long cut, M8 and M7 leave the branches of a node lost.
	scenario("M9CatalogStopped", func(t *testing.T) {
		c.deadAfter(t, failDeadAfter)
		testCatalogStopped(t, ctx, c, outage, failDeadAfter)
	})
	if long {
		scenario("M11CatalogCutShort", func(t *testing.T) {
			c.deadAfter(t, failDeadAfter)
			testCatalogCut(t, ctx, c, c.nodes[0], c.nodes[1], false, failDeadAfter)
		})
		scenario("M11CatalogCutLong", func(t *testing.T) {
			c.deadAfter(t, failDeadAfter)
			testCatalogCut(t, ctx, c, c.nodes[0], c.nodes[1], true, failDeadAfter)
		})
	}
	scenario("M8NodeFrozen", func(t *testing.T) {
		c.deadAfter(t, failDeadAfter)
		testFrozenNode(t, ctx, c, c.nodes[1], c.nodes[0], failDeadAfter)
	})
	if long {
		// The victim is not the node that built the seed (node-1).
		scenario("M7NodeDiskLost", func(t *testing.T) {
			c.deadAfter(t, failDeadAfter)
			testDiskLoss(t, ctx, c, c.nodes[1], c.nodes[0], failDeadAfter)
		})
		// Last: the catalog is the promoted standby from then on.
		scenario("M10CatalogFailover", func(st *testing.T) {
			c.deadAfter(st, failDeadAfter)
			testCatalogFailover(st, t, ctx, c, failDeadAfter)
		})
	}
	t.Logf("simulation took %s; machine at the end: %s", time.Since(start).Round(time.Millisecond), machineLine())
}

// failDeadAfter is the nodes' --node-dead-after in the failure scenarios (M7,
// M8, M9, M11): longer than a heartbeat's retry (2 s) with room, so that a node
// back within it keeps its registration, and short enough for a node to be
// declared dead within 10 to 16 s (lease 6 s, a janitor pass every 6 s).
const failDeadAfter = 4 * time.Second

// duration reads a positive duration from the environment variable name.
func duration(t *testing.T, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, s)
	}
	return d
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

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
// failed one left stopped). SIM_RACE_REPS sets M3's repetitions (default 10).
func TestSmoke(t *testing.T) {
	reps := 10
	if s := os.Getenv("SIM_RACE_REPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("SIM_RACE_REPS=%q: want a positive number", s)
		}
		reps = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	t.Logf("machine: %s", machineLine())
	start := time.Now()
	c := startCluster(t, ctx, 2, 3)
	t.Logf("cluster up in %s: a catalog, %d nodes, %d fronts", time.Since(start).Round(time.Millisecond), len(c.nodes), len(c.fronts))

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
	var on map[string][]string
	scenario("Branches", func(t *testing.T) { on = branchesOn(t, ctx, c, "b") })
	if t.Failed() {
		return
	}
	scenario("FrontKilledMidSession", func(t *testing.T) { testFrontKillMidSession(t, ctx, c, on[c.nodes[0].name][1]) })
	scenario("M6NodeKilled", func(t *testing.T) { testNodeKill(t, ctx, c, on) })
	scenario("Partition", func(t *testing.T) { testPartition(t, ctx, c, on) })
	t.Logf("simulation took %s; machine at the end: %s", time.Since(start).Round(time.Millisecond), machineLine())
}

package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestReaperWith200Branches creates 200 branches (at most 8 running) and checks
// from the reaper's own histogram that every pass over them took under a second.
func TestReaperWith200Branches(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 200 branches")
	}
	s := startServer(t, newStateDir(t), "--max-running", "8", "--reap-interval", "100ms", "--idle-stop", "1h")
	s.seedSQL("app", lifecycleSQL)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	sem := make(chan struct{}, 4)
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if out, err := s.cli("branch", "create", fmt.Sprintf("b%03d", i)); err != nil {
				errs <- fmt.Errorf("b%03d: %v: %s", i, err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := len(s.branches()); n != 200 {
		t.Fatalf("%d branches, want 200", n)
	}
	time.Sleep(time.Second) // several passes over all 200
	m := s.metrics(t)
	count := metricValue(t, m, `pgbranch_reaper_pass_seconds_count`)
	underOne := metricValue(t, m, `pgbranch_reaper_pass_seconds_bucket{le="1"}`)
	sum := metricValue(t, m, `pgbranch_reaper_pass_seconds_sum`)
	t.Logf("reaper passes: %v, mean %.1f ms, all under 1 s: %v", count, 1000*sum/count, underOne == count)
	if count < 5 || underOne != count {
		t.Errorf("reaper passes: %v total, %v under a second", count, underOne)
	}
	running := 0
	for _, b := range s.branches() {
		if b.State == "running" {
			running++
		}
	}
	if running > 8 {
		t.Errorf("%d branches running with --max-running 8", running)
	}
}

func metricValue(t testing.TB, metrics, name string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`)
	m := re.FindStringSubmatch(metrics)
	if m == nil {
		t.Fatalf("metric %s not found", name)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

package branches

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestCheckLimits(t *testing.T) {
	for _, tc := range []struct {
		memory int64
		cpus   float64
		pids   int64
		ok     bool
	}{
		{0, 0, 0, true},
		{300 << 20, 0.5, 100, true},
		{6 << 20, 1, 0, true},
		{1024, 0, 0, false},
		{100, 0, 0, false},
		{0, 0.001, 0, false},
		{-1, 0, 0, false},
		{0, 0, -5, false},
	} {
		err := checkLimits(tc.memory, tc.cpus, tc.pids)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("checkLimits(%d, %g, %d) = %v, want ok %v", tc.memory, tc.cpus, tc.pids, err, tc.ok)
		}
	}
}

// A branch set refused for its limits changes nothing else either.
func TestSetRefusedChangesNothing(t *testing.T) {
	t.Parallel()
	m := newUnitManager(t, "")
	b := addStopped(t, m, "b", time.Now().UTC())
	ttl, small := TTL(time.Hour), int64(1024)
	s := Settings{TTL: &ttl, ServerLimits: ServerLimits{MemoryBytes: &small}}
	if err := m.Set(context.Background(), "s", "b", s); !errors.Is(err, ErrInvalid) {
		t.Fatalf("set with a 1KB memory limit: %v, want ErrInvalid", err)
	}
	if b.rec.TTL != 0 {
		t.Errorf("the refused set saved its TTL: %s", b.rec.TTL)
	}
}

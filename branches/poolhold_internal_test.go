package branches

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// A pool keeps the larger of its setting and its largest live hold; a hold ends
// when released or when its TTL has passed, and ends once.
func TestWarmHolds(t *testing.T) {
	ctx := context.Background()
	m := newUnitManager(t, "")
	m.closed = true // no refill: this is about the numbers it would refill to
	m.sources["s"] = &sourceState{src: catalog.Source{Name: "s", Warm: 2}}
	warm := func() int {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.warmLocked(m.sources["s"])
	}
	hold := func(n int, ttl time.Duration) string {
		t.Helper()
		id, err := m.HoldWarm(ctx, "s", n, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	a, b := hold(6, time.Hour), hold(4, time.Hour)
	if got := warm(); got != 6 {
		t.Errorf("holds of 6 and 4 over a setting of 2: %d", got)
	}
	if err := m.ReleaseWarm(ctx, "s", a); err != nil || warm() != 4 {
		t.Errorf("after releasing the hold of 6: %v, %d members", err, warm())
	}
	if err := m.ReleaseWarm(ctx, "s", a); !errors.Is(err, ErrNotFound) {
		t.Errorf("released twice: %v", err)
	}
	m.ReleaseWarm(ctx, "s", b)
	hold(8, time.Millisecond)
	time.Sleep(5 * time.Millisecond)
	if got := warm(); got != 2 || len(m.sources["s"].holds) != 0 {
		t.Errorf("after a hold's TTL: %d members, holds %v", got, m.sources["s"].holds)
	}
	if _, err := m.HoldWarm(ctx, "nosuch", 1, time.Hour); !errors.Is(err, ErrNotFound) {
		t.Errorf("hold on no source: %v", err)
	}
	for _, bad := range []struct {
		n   int
		ttl time.Duration
	}{{-1, time.Hour}, {1, 0}, {1, MaxWarmHold + time.Second}} {
		if _, err := m.HoldWarm(ctx, "s", bad.n, bad.ttl); !errors.Is(err, ErrInvalid) {
			t.Errorf("hold of %d for %s: %v", bad.n, bad.ttl, err)
		}
	}
}

package branches

import (
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// The database pool members open sessions for under --warm-user USER (no @DB) is
// the one the source's clients use, also for a source added without --database.
func TestClientDatabase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, def string
		dbs       []string
		want      string
	}{
		{"default set", "shop", []string{"shop", "app", "postgres"}, "shop"},
		{"one database of its own", "", []string{"bench", "postgres", "template1"}, "bench"},
		{"several, one named like the source", "", []string{"src", "other", "postgres"}, "src"},
		{"several, none named like the source", "", []string{"a", "b", "postgres"}, "postgres"},
		{"only initdb's", "", []string{"postgres", "template1"}, "postgres"},
	}
	for _, tt := range tests {
		s := &sourceState{src: catalog.Source{Name: "src", DefaultDatabase: tt.def}, seed: &catalog.Seed{Databases: tt.dbs}}
		if got := s.clientDatabase(); got != tt.want {
			t.Errorf("%s: clientDatabase = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestTopKeys(t *testing.T) {
	t.Parallel()
	got := topKeys(map[string]int{"a": 1, "b": 5, "c": 3, "d": 0}, 2)
	if len(got) != 2 || got[0] != "b" || got[1] != "c" {
		t.Fatalf("topKeys = %q, want [b c]", got)
	}
	if got := topKeys(map[string]int{"a": 1}, 3); len(got) != 1 {
		t.Fatalf("topKeys of one key = %q", got)
	}
}

func TestRefillNow(t *testing.T) {
	for _, c := range []struct {
		have, reserve int
		since         time.Duration
		now           bool
	}{
		{4, 2, time.Millisecond, false}, // a claim just now, pool above its reserve: wait
		{4, 2, claimRefillDelay, true},  // claims paused
		{2, 2, time.Millisecond, true},  // down to the reserve: refill before the burst empties it
		{100, 40, time.Millisecond, false},
		{0, 0, time.Millisecond, true}, // an empty pool never waits
		{3, 1, time.Hour, true},        // no recent claim
	} {
		if got := refillNow(c.have, c.reserve, c.since); got != c.now {
			t.Errorf("refillNow(%d, %d, %s) = %v, want %v", c.have, c.reserve, c.since, got, c.now)
		}
	}
}

// Until a burst's pace and a member's creation time are known, a pool refills
// below half; then it keeps what the burst claims while a member is made, if that
// is less.
func TestPoolReserve(t *testing.T) {
	var p poolPace
	if got := p.reserve(200); got != 99 {
		t.Errorf("reserve(200) with no pace = %d, want 99 (below half)", got)
	}
	if got := p.reserve(5); got != 2 {
		t.Errorf("reserve(5) with no pace = %d, want 2", got)
	}
	p.claimed(time.Hour) // not within a burst
	p.claimed(10 * time.Millisecond)
	p.filled(100 * time.Millisecond)
	if got := p.reserve(200); got != 31 {
		t.Errorf("reserve(200) at a claim every 10 ms and 100 ms per member = %d, want 31 (300 ms of claims, with a refill look's delay)", got)
	}
	if got := p.reserve(5); got != 2 {
		t.Errorf("reserve(5) = %d, want 2: never more than half", got)
	}
	p.claimed(30 * time.Millisecond) // the average moves a quarter of the way: 15 ms
	if p.claimGap != 15*time.Millisecond {
		t.Errorf("claim gap %s after 10 and 30 ms, want 15ms", p.claimGap)
	}
}

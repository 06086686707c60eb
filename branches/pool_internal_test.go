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
		have, want int
		since      time.Duration
		now        bool
	}{
		{4, 5, time.Millisecond, false},     // a claim just now, pool mostly full: wait
		{4, 5, claimRefillDelay, true},      // claims paused
		{2, 5, time.Millisecond, true},      // below half: refill before the burst empties it
		{100, 200, time.Millisecond, false}, // exactly half: still waits
		{99, 200, time.Millisecond, true},   // below half
		{0, 1, time.Millisecond, true},      // an empty pool never waits
		{3, 5, time.Hour, true},             // no recent claim
	} {
		if got := refillNow(c.have, c.want, c.since); got != c.now {
			t.Errorf("refillNow(%d, %d, %s) = %v, want %v", c.have, c.want, c.since, got, c.now)
		}
	}
}

package proxy

import (
	"testing"
	"time"
)

// TestFailuresRetryCountsOnce: libpq's sslmode=prefer tries a login refused over
// TLS once more without it (sslmode=allow the other way round); that retry, by the
// same user from the same address soon after, is the same attempt and counts once.
// Anything else counts: a second failure over the same transport, another user's,
// one that comes later, and a third in a row.
func TestFailuresRetryCountsOnce(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	type try struct {
		user string
		tls  bool
		at   time.Duration
	}
	tests := []struct {
		name  string
		tries []try
		want  int
	}{
		{"prefer: TLS, then plaintext", []try{{"u", true, 0}, {"u", false, 50 * time.Millisecond}}, 1},
		{"allow: plaintext, then TLS", []try{{"u", false, 0}, {"u", true, 50 * time.Millisecond}}, 1},
		{"three prefer attempts", []try{{"u", true, 0}, {"u", false, 10 * time.Millisecond},
			{"u", true, time.Second}, {"u", false, time.Second + 10*time.Millisecond},
			{"u", true, 2 * time.Second}, {"u", false, 2*time.Second + 10*time.Millisecond}}, 3},
		{"one retry per failure", []try{{"u", true, 0}, {"u", false, 10 * time.Millisecond}, {"u", true, 20 * time.Millisecond}}, 2},
		{"same transport twice", []try{{"u", true, 0}, {"u", true, 10 * time.Millisecond}}, 2},
		{"another user", []try{{"u", true, 0}, {"v", false, 10 * time.Millisecond}}, 2},
		{"too late for a retry", []try{{"u", true, 0}, {"u", false, retryWindow + time.Millisecond}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFailures(100, time.Minute)
			for _, tr := range tt.tries {
				f.fail("192.0.2.1", tr.user, tr.tls, t0.Add(tr.at))
			}
			if got := f.entries["192.0.2.1"].count; got != tt.want {
				t.Errorf("counted %d failures, want %d", got, tt.want)
			}
		})
	}
	// With 2 allowed, a first prefer attempt leaves one: the second fails over
	// TLS, and its retry is refused.
	f := newFailures(2, time.Minute)
	f.fail("h", "u", true, t0)
	f.fail("h", "u", false, t0)
	if f.blocked("h", t0) {
		t.Fatal("blocked after one prefer attempt, with 2 allowed")
	}
	f.fail("h", "u", true, t0)
	if !f.blocked("h", t0) {
		t.Fatal("not blocked after the second attempt failed, with 2 allowed")
	}
}

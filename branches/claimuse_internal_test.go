package branches

import "testing"

// New members open as many sessions ahead as recent claims used at once: two
// until a claimed branch has had a session, then the most any of the last
// claimUseWindow had, at most maxAhead.
func TestClaimUseAhead(t *testing.T) {
	t.Parallel()
	var u claimUse
	if n := u.ahead(); n != maxAhead {
		t.Fatalf("no claim yet: %d ahead, want %d", n, maxAhead)
	}
	claim := func(peak int) *branch {
		b := &branch{peak: peak}
		u.claimed(b)
		return b
	}
	first := claim(0)
	if n := u.ahead(); n != maxAhead {
		t.Fatalf("a claim without a session yet: %d ahead, want %d", n, maxAhead)
	}
	first.peak = 1
	if n := u.ahead(); n != 1 {
		t.Fatalf("one session at once: %d ahead, want 1", n)
	}
	two := claim(2)
	if n := u.ahead(); n != 2 {
		t.Fatalf("a claim with two at once: %d ahead, want 2", n)
	}
	two.peak = 5
	if n := u.ahead(); n != maxAhead {
		t.Fatalf("five at once: %d ahead, want at most %d", n, maxAhead)
	}
	for range claimUseWindow {
		claim(1)
	}
	if n := u.ahead(); n != 1 {
		t.Fatalf("the claim with five has left the window: %d ahead, want 1", n)
	}
}

package errs

import "testing"

// Every error has a rank of its own, so that which one a client is told never
// depends on how a chain was wrapped.
func TestPrecedenceRanksEach(t *testing.T) {
	seen := map[int]*Error{}
	for _, e := range precedence {
		if e.Rank() <= 0 || seen[e.Rank()] != nil {
			t.Errorf("%q: rank %d", e, e.Rank())
		}
		seen[e.Rank()] = e
		if e.SQLState() == "" || e.ClientMessage() == "" {
			t.Errorf("%q tells a client nothing", e)
		}
	}
	all := []*Error{ErrNotFound, ErrExists, ErrOtherParent, ErrNotReady, ErrBusy, ErrEnded, ErrStartFailed, ErrNotGone,
		ErrClosed, ErrInvalid, ErrLayerMissing, ErrCatalogUnavailable, ErrFenced, ErrNodeLost, ErrLost,
		ErrDraining, ErrQuota, ErrDiskFull, ErrNoSpace, ErrTooMany, ErrTooManySessions}
	if len(all) != len(precedence) {
		t.Errorf("%d errors, %d ranked", len(all), len(precedence))
	}
	for _, e := range all {
		if e.Rank() == 0 {
			t.Errorf("%q has no rank", e)
		}
	}
}

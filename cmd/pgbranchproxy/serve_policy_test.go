package main

import (
	"strings"
	"testing"
)

// A --disk-reserve that leaves nothing of --disk-budget is refused at start: every
// new branch would get 53100 once one branch owned a byte.
func TestReserveBelowBudget(t *testing.T) {
	for _, tc := range []struct {
		budget, reserve int64
		ok              bool
	}{{0, 0, true}, {0, 1 << 30, true}, {10 << 30, 1 << 30, true}, {10 << 30, 10 << 30, false}, {1 << 30, 2 << 30, false}} {
		f := &serveFlags{diskBudget: sizeText(tc.budget)}
		f.policy.DiskBudget, f.policy.DiskReserve = tc.budget, tc.reserve
		err := checkReserve(f)
		if (err == nil) != tc.ok || err != nil && !strings.Contains(err.Error(), "leaves nothing of --disk-budget "+sizeText(tc.budget)) {
			t.Errorf("budget %d, reserve %d: %v", tc.budget, tc.reserve, err)
		}
	}
}

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

// The counts to which 0 means nothing are refused at start rather than taken for
// their defaults in silence: --max-failed-logins 0 was 20 failures a minute, not
// none and not unlimited.
func TestZeroCountsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" for accepted
	}{
		{nil, ""},
		{[]string{"--max-creating", "0"}, "--max-creating 0"},
		{[]string{"--max-layers", "0"}, "--max-layers 0"},
		{[]string{"--max-layers", "-3"}, "--max-layers -3"},
		{[]string{"--max-failed-logins", "0"}, "--max-failed-logins 0"},
		{[]string{"--max-failed-logins", "-1", "--max-creating", "1", "--max-layers", "1"}, ""},
	} {
		cmd := newServe(&globalFlags{})
		if err := cmd.ParseFlags(tc.args); err != nil {
			t.Fatal(err)
		}
		f := &serveFlags{}
		f.maxCreating, _ = cmd.Flags().GetInt("max-creating")
		f.maxLayers, _ = cmd.Flags().GetInt("max-layers")
		f.failedLogins, _ = cmd.Flags().GetInt("max-failed-logins")
		err := checkCounts(f)
		if err == nil {
			err = checkFailedLogins(f)
		}
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

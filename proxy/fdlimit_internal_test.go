package proxy

import (
	"math"
	"testing"

	"go.uber.org/zap"
)

func TestClientConnsFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		nofile uint64
		want   int
	}{
		{65536, 16384}, // the systemd unit's LimitNOFILE
		{1024, 256},
		{3, 1},
		{0, 1},
		{math.MaxUint64, math.MaxInt32}, // RLIM_INFINITY
	} {
		if got := clientConnsFor(tc.nofile); got != tc.want {
			t.Errorf("clientConnsFor(%d) = %d, want %d", tc.nofile, got, tc.want)
		}
	}
}

// TestMaxClientConnsDefault: without a setting, clients are capped by the open-file
// limit, so that clients that never log in cannot take every descriptor; a
// negative setting lifts the cap.
func TestMaxClientConnsDefault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ set, want int }{
		{0, clientConnsFor(openFileLimit())},
		{5, 5},
		{-1, -1},
	} {
		s, err := New(Config{MaxClientConns: tc.set, Relay: RelayGoroutine}, refusingBranches{}, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		if got := s.MaxClientConns(); got != tc.want || got == 0 {
			t.Errorf("MaxClientConns %d: %d, want %d", tc.set, got, tc.want)
		}
	}
}

package branches

import (
	"errors"
	"testing"
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
		{0, 10000, 0, false},
		{-1, 0, 0, false},
		{0, 0, -5, false},
	} {
		err := checkLimits(tc.memory, tc.cpus, tc.pids)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("checkLimits(%d, %g, %d) = %v, want ok %v", tc.memory, tc.cpus, tc.pids, err, tc.ok)
		}
	}
}

package branches

import (
	"testing"
	"time"
)

// A session that could not reach its server does not count as a use of the branch.
func TestLeaseUseFailedDial(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		failed  bool
		between bool // another session used the branch in the meantime
		want    time.Time
	}{
		{"used", false, false, t0.Add(2 * time.Minute)},
		{"failed", true, false, t0},
		{"failed, other session since", true, true, t0.Add(90 * time.Second)},
	} {
		b := &branch{}
		var u leaseUse
		u.prev, u.at = t0, t0.Add(time.Minute)
		b.rec.LastUsedAt = u.at
		if tc.between {
			b.rec.LastUsedAt = t0.Add(90 * time.Second)
		}
		u.failed.Store(tc.failed)
		u.release(b, t0.Add(2*time.Minute))
		if !b.rec.LastUsedAt.Equal(tc.want) {
			t.Errorf("%s: last use %s, want %s", tc.name, b.rec.LastUsedAt, tc.want)
		}
	}
}

package branches

import (
	"sync/atomic"
	"time"
)

// leaseUse is how a lease counts as a use of its branch. A session that could not
// reach the branch's server is no use: it must not put off the idle stop that would
// repair the branch, nor its TTL.
type leaseUse struct {
	prev   time.Time   // the branch's last use before this lease
	at     time.Time   // the last use this lease recorded when it was acquired
	failed atomic.Bool // Dial failed
}

// release records the end of the lease's session at now. m.mu is held.
func (u *leaseUse) release(b *branch, now time.Time) {
	if !u.failed.Load() {
		b.rec.LastUsedAt = now
		return
	}
	if b.rec.LastUsedAt.Equal(u.at) {
		b.rec.LastUsedAt = u.prev // no session used it since
	}
}

package branches

// How claimed pool members are used, so that new members open as many server
// sessions ahead as their clients will use at once, and no more: on a machine
// where a backend start costs tens of milliseconds, a session opened for nobody is
// a fork and an exit paid for each claim.

// claimUseWindow is how many of a source's last claimed branches are looked at.
const claimUseWindow = 8

// maxAhead bounds the sessions opened ahead for a source's most used startup key:
// a test often opens two at once (a helper's own session beside the test's).
const maxAhead = 2

// claimUse remembers a source's last claimed branches. Guarded by Manager.mu.
type claimUse struct {
	recent [claimUseWindow]*branch
	next   int
}

// claimed records b, just claimed.
func (u *claimUse) claimed(b *branch) {
	u.recent[u.next] = b
	u.next = (u.next + 1) % claimUseWindow
}

// ahead returns how many sessions a new member opens for the most used key: the
// most that one of the recent claimed branches had at once, between 1 and
// maxAhead, or maxAhead while none of them has had a session.
func (u *claimUse) ahead() int {
	n := 0
	for _, b := range u.recent {
		if b != nil {
			n = max(n, b.peak)
		}
	}
	if n == 0 {
		return maxAhead
	}
	return min(n, maxAhead)
}

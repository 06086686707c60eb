package branches

import (
	"context"
	"fmt"
)

// While connections claim a source's pool members in a burst (a test suite's
// workers, a fan-out), the destroys of its ephemeral branches whose sessions have
// ended wait until the claims pause for claimRefillDelay, as the pool's refill
// does: a destroy ends a server's processes and unmounts its layer, which takes the
// cores from the claimed branches' first queries. The wait is bounded: no more than
// the pool's size of a source's ended branches wait, so a suite that never pauses
// holds at most that many servers more, and none waits when a pool member could not
// be started beside it (--max-running, the disk budget). An ended branch is gone
// at once: a connection to its name destroys it first and gets a new branch
// (Acquire), the engine's own work does not find it (acquireExisting, a fork's
// parent), and a shutdown destroys it rather than stopping it (Close).

// endedReason is the catalog's reason for an ended branch's destroy, whoever does it.
const endedReason = "ephemeral: its last session ended"

// codeEnded is the reaper's action code (and metric reason) for that destroy.
const codeEnded = "ephemeral"

// ended reports whether b is an ephemeral branch whose sessions have all ended: it
// is gone for its clients and waits for its destroy. m.mu is held.
func (b *branch) ended() bool {
	return b.rec.Ephemeral && b.hadSession && b.sessions == 0
}

// destroyEndedLocked starts the destroy of b, an ended branch, for a caller that
// wants its name for a new branch (a connection, the admin API's create). Its
// failure is ErrNotGone. m.mu is held and b has no operation.
func (m *Manager) destroyEndedLocked(b *branch) *op {
	name := b.rec.Name
	return m.startOp(b, "destroy", func(ctx context.Context) error {
		if err := m.destroyBranch(ctx, b, endedReason); err != nil {
			return fmt.Errorf("branch %q: %w: %w", name, ErrNotGone, err)
		}
		m.cfg.Metrics.action("destroy", codeEnded)
		return nil
	})
}

// stillEnded refuses the reaper's destroy of an ended branch when b is no longer
// one: a session came, or a connection replaced the branch with a new one of its
// name (Acquire) between the pass's plan and the destroy. m.mu is held.
func stillEnded(b *branch) error {
	if !b.ended() {
		return fmt.Errorf("branch %q: %w (no longer an ephemeral branch whose sessions ended)", b.rec.Name, ErrBusy)
	}
	return nil
}

// waitsOutBurst reports whether the reaper's action a, an ended ephemeral
// branch's destroy, waits for the claims of its source to pause; waiting counts
// the destroys already held back in this pass, by source.
func (m *Manager) waitsOutBurst(a action, waiting map[string]int) bool {
	if a.kind != actDestroy || a.code != codeEnded || a.evict {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.claimingLocked(a.k.source) || waiting[a.k.source] >= m.warmLocked(m.sources[a.k.source]) || !m.poolRoomLocked() {
		return false
	}
	waiting[a.k.source]++
	return true
}

// claimingLocked reports whether connections are claiming source's pool members
// in a burst: the last claim is less than claimRefillDelay old. m.mu is held.
func (m *Manager) claimingLocked(source string) bool {
	s := m.sources[source]
	return s != nil && m.now().Sub(s.lastClaim) < claimRefillDelay
}

// reapSoon runs a reaper pass after claimRefillDelay, once for every pass that
// held destroys back meanwhile.
func (m *Manager) reapSoon() { afterClaims(&m.reapDue, m.kickReaper) }

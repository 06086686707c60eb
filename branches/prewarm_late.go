package branches

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
)

// Sessions ahead for startup keys first used after the pool's members were made.
// A member opens its sessions ahead for the keys its source's clients have used
// (prewarm); a member made before any client came (a fresh serve without
// --warm-user, or a restart) has none that fit, and each claim of one forked a
// backend until the pool had turned over. When a source's clients use a key for
// the first time, its members open the sessions for it that members made from then
// on open, one member at a time, once claims pause (as the refill waits).

// latePrewarm schedules and serializes the passes over the pools.
type latePrewarm struct {
	due     atomic.Bool // a pass is scheduled
	running atomic.Bool // a pass is running
	again   atomic.Bool // a pass was asked for since the running one began
}

// prewarmSoon runs prewarmPools after claimRefillDelay, once for every call made
// meanwhile.
func (m *Manager) prewarmSoon() { afterClaims(&m.late.due, m.prewarmPools) }

// prewarmPools opens, on every pool member, the sessions ahead it lacks for its
// source's keys. A call while a pass runs makes that pass run once more.
func (m *Manager) prewarmPools() {
	m.late.again.Store(true)
	for m.late.running.CompareAndSwap(false, true) {
		for m.late.again.Swap(false) {
			if !m.prewarmPass() {
				break
			}
		}
		m.late.running.Store(false)
		if !m.late.again.Load() {
			return
		}
	}
}

// prewarmPass goes once over the pool members there are now. It stops, and
// schedules itself again, when a member's source is in a burst of claims: it
// reports false then.
func (m *Manager) prewarmPass() bool {
	m.mu.Lock()
	var members []*branch
	for _, b := range m.branches {
		if b.rec.Pooled {
			members = append(members, b)
		}
	}
	m.mu.Unlock()
	for _, b := range members {
		m.mu.Lock()
		s := m.sources[b.rec.Source]
		if m.closed {
			m.mu.Unlock()
			return true
		}
		if s != nil && m.now().Sub(s.lastClaim) < claimRefillDelay {
			m.mu.Unlock()
			m.prewarmSoon()
			return false
		}
		ready := s != nil && s.seed != nil && b.rec.SeedID == s.seed.ID && b.rec.State == catalog.Running && m.lateMemberLocked(b)
		m.mu.Unlock()
		if ready {
			ctx, cancel := context.WithTimeout(context.Background(), m.cfg.CreateTimeout)
			m.prewarm(ctx, b, true)
			cancel()
		}
	}
	return true
}

// lateMemberLocked reports whether b is a pool member with a running server and
// no operation: a late session may be opened and parked on it. m.mu is held.
func (m *Manager) lateMemberLocked(b *branch) bool {
	return !m.closed && b.rec.Pooled && b.op == nil && b.inst != nil
}

// lacksKey reports whether a late session for key k should be opened on b, which
// ran on inst when the pass began: b is still such a member on inst, has room, and
// has exactly the have sessions for k that this pass parked.
func (m *Manager) lacksKey(b *branch, inst runtime.Instance, k string, have int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lateMemberLocked(b) && b.inst == inst && b.idleCount < m.cfg.MaxIdleServers && len(b.idle[k]) == have
}

// newKeyLocked schedules a pass when key k, just counted for the first time for
// source s, is one that members open sessions for (prewarm). m.mu is held.
func (m *Manager) newKeyLocked(s *sourceState, k string) {
	if m.warmLocked(s) > 0 && slices.Contains(topKeys(s.keys, prewarmKeys), k) {
		m.prewarmSoon()
	}
}

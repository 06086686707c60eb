package branches

import (
	"context"
	"sync/atomic"
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
		ready := s != nil && b.rec.Pooled && b.op == nil && b.inst != nil
		m.mu.Unlock()
		if ready {
			ctx, cancel := context.WithTimeout(context.Background(), m.cfg.CreateTimeout)
			m.prewarm(ctx, b, true)
			cancel()
		}
	}
	return true
}

// lacksKey reports whether b is still a running pool member with no session
// parked for key k.
func (m *Manager) lacksKey(b *branch, k string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return b.rec.Pooled && b.inst != nil && len(b.idle[k]) == 0
}

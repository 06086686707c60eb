package branches

import (
	"context"
	"errors"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"go.uber.org/zap"
)

// reaper is the one loop that applies the Policy: idle stop, TTL, ephemeral
// destruction, quota resets, disk-budget eviction. It also measures owned bytes and
// persists last-use times. It runs every Config.ReapInterval and when kicked (a
// session of an ephemeral or over-quota branch ended).
func (m *Manager) reaper(ctx context.Context) {
	defer close(m.reaperDone)
	t := time.NewTicker(m.cfg.ReapInterval)
	defer t.Stop()
	for {
		kind := passTimed
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.kick:
			kind = passKicked
		}
		if m.cfg.Join {
			if err := m.syncSources(ctx); err != nil {
				m.log.Debug("read the catalog's sources", zap.Error(err))
			}
			m.prefetchSeeds(ctx)
			// Other nodes' branches, which end without this node's knowing, and
			// refreshes elsewhere free seeds and copies here.
			m.collectSeeds(ctx)
		}
		m.maybeDropOrphans(ctx)
		m.reapPass(ctx, kind)
		m.pruneLogs(ctx) // not in reapPass, which a client's create may run inline
	}
}

// kickReaper asks for a pass soon, without blocking.
func (m *Manager) kickReaper() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// passKind says what started a reaper pass.
type passKind int

const (
	passTimed  passKind = iota // the reaper's ticker
	passKicked                 // a session of an ephemeral or over-quota branch ended
	passBudget                 // a creation over the disk budget, inline: it may evict or refuse
)

// reapPass runs one pass; it is also called inline to make room on the disk budget
// (passBudget), with every branch measured.
func (m *Manager) reapPass(ctx context.Context, kind passKind) {
	m.reapMu.Lock()
	defer m.reapMu.Unlock()
	start := time.Now()
	views, touched := m.snapshot(kind == passBudget)
	acts, over := plan(m.cfg.Policy, m.now(), views)
	var total int64
	for _, v := range views {
		total += v.owned
	}
	m.mu.Lock()
	m.ownedTotal = total
	for _, b := range m.branches {
		b.overQuota = over[key{b.rec.Source, b.rec.Name}]
	}
	m.mu.Unlock()
	m.persistUse(ctx, touched)
	waiting := map[string]int{}
	for _, a := range acts {
		if ctx.Err() != nil {
			return
		}
		if kind != passBudget && m.waitsOutBurst(a, waiting) {
			continue
		}
		m.apply(ctx, a)
	}
	if len(waiting) > 0 {
		m.reapSoon()
	}
	m.refreshRunningRoles(ctx, kind == passTimed)
	m.expireIdle()
	if kind == passTimed {
		m.rotateServerLogs() // a stat per running server: not at every session's end
	}
	m.refillPools()
	m.updateGauges()
	if m.cfg.Metrics != nil {
		m.cfg.Metrics.reapPass.Observe(time.Since(start).Seconds())
	}
}

// snapshot builds the planner's view, measuring owned bytes of branches that may have
// changed since they were last measured (all: of every branch), and collects
// last-use times to persist.
func (m *Manager) snapshot(all bool) ([]view, map[int64]time.Time) {
	type measure struct {
		b     *branch
		upper string
		ops   uint64
	}
	var todo []measure
	m.mu.Lock()
	now := m.now()
	for _, b := range m.branches {
		if b.rec.ID == 0 || b.op != nil {
			continue
		}
		if all || b.dueMeasure(now) {
			todo = append(todo, measure{b, m.layoutOf(b.rec.ID).upper, b.ops})
		}
	}
	m.mu.Unlock()
	measured := make(map[*branch]int64, len(todo))
	started := make(map[*branch]uint64, len(todo))
	for _, t := range todo {
		if n, err := m.measure(t.b, t.upper); err == nil {
			measured[t.b], started[t.b] = n, t.ops
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	views := make([]view, 0, len(m.branches))
	touched := map[int64]time.Time{}
	for k, b := range m.branches {
		// An operation that started since the walk (a reset writes 0) knows better.
		if n, ok := measured[b]; ok && b.op == nil && b.ops == started[b] {
			b.rec.OwnedBytes, b.measuredAt = n, now
		}
		if b.rec.ID != 0 && !b.rec.LastUsedAt.Equal(b.persistedUse) {
			touched[b.rec.ID] = b.rec.LastUsedAt
		}
		views = append(views, view{
			k: k, running: b.inst != nil, sessions: b.sessions,
			// A lost or fenced branch's row is not this node's to change: only an admin destroys it.
			busy:   b.op != nil || b.rec.ID == 0 || b.fenced || b.rec.State == catalog.Lost,
			pooled: b.rec.Pooled, ephemeral: b.rec.Ephemeral && b.hadSession, ttl: b.rec.TTL, quota: b.rec.Quota, owned: b.rec.OwnedBytes,
			createdAt: b.rec.CreatedAt, lastUsedAt: b.rec.LastUsedAt,
		})
	}
	return views, touched
}

// idleMeasureEvery is how often a running branch without sessions is measured: only
// its server's own writes (a checkpoint flushing what its last session changed)
// can grow it. A walk of every running branch's layer at each pass was most of the
// reaper's cost with hundreds of them (pool members), and passes run at each end of
// an ephemeral branch's session. A second of slack keeps a 10 s reaper interval
// from skipping every other pass.
const idleMeasureEvery = 10 * time.Second

// dueMeasure reports whether b's owned bytes should be measured at now: never
// measured, used since, in use, or running and not measured for about
// idleMeasureEvery (or measured "later" than now: the clock was set back). m.mu is
// held.
func (b *branch) dueMeasure(now time.Time) bool {
	switch {
	case b.measuredAt.IsZero(), b.rec.LastUsedAt.After(b.measuredAt), b.sessions > 0:
		return true
	}
	since := now.Sub(b.measuredAt)
	return b.inst != nil && (since < 0 || since >= idleMeasureEvery-time.Second)
}

// apply carries out one planned action, unless a session arrived in the meantime.
func (m *Manager) apply(ctx context.Context, a action) {
	var fn func(context.Context, *branch) error
	switch a.kind {
	case actStop:
		fn = func(ctx context.Context, b *branch) error { return m.stopBranch(ctx, b, a.reason) }
	case actReset:
		fn = func(ctx context.Context, b *branch) error { return m.resetBranch(ctx, b, a.reason) }
		if a.evict {
			fn = func(ctx context.Context, b *branch) error { return m.evictBranch(ctx, b, a.reason) }
		}
	case actDestroy:
		fn = func(ctx context.Context, b *branch) error { return m.destroyBranch(ctx, b, a.reason) }
	}
	check := noSessions
	if a.code == codeEnded {
		check = stillEnded
	}
	start := time.Now()
	err := m.do(ctx, a.k, string(a.kind), check, fn)
	switch {
	case err == nil:
		name := string(a.kind)
		if a.evict {
			name = "evict"
		}
		m.cfg.Metrics.action(name, a.code)
		if a.kind == actReset {
			m.cfg.Metrics.took("reset", time.Since(start))
		}
	case errors.Is(err, ErrBusy), errors.Is(err, ErrNotFound), errors.Is(err, ErrClosed):
		// A session arrived, or the branch went, after the plan: nothing to do.
	case ctx.Err() != nil:
		// Shutting down: Close stops the branch anyway.
		m.log.Debug("reaper action cut short by shutdown", zap.String("branch", a.k.name), zap.String("action", string(a.kind)))
	default:
		m.log.Error("reaper action failed", zap.String("source", a.k.source), zap.String("branch", a.k.name),
			zap.String("action", string(a.kind)), zap.String("reason", a.reason), zap.Error(err))
	}
}

// updateGauges refreshes the state and session gauges.
func (m *Manager) updateGauges() {
	mt := m.cfg.Metrics
	if mt == nil {
		return
	}
	counts := map[catalog.State]int{}
	sessions := 0
	m.mu.Lock()
	for _, b := range m.branches {
		if b.rec.Pooled {
			counts["pooled"]++
			continue
		}
		counts[b.rec.State]++
		sessions += b.sessions
	}
	total := m.ownedTotal
	m.mu.Unlock()
	for _, s := range []catalog.State{catalog.Creating, catalog.Starting, catalog.Running, catalog.Stopping, catalog.Stopped, catalog.Resetting, catalog.Destroying, catalog.Failed, catalog.Lost, "pooled"} {
		mt.byState.WithLabelValues(string(s)).Set(float64(counts[s]))
	}
	mt.sessions.Set(float64(sessions))
	mt.owned.Set(float64(total))
}

// persistUse writes last-use times to the catalog and marks them saved only once the
// write succeeded, so that a failed write is tried again by the next pass. The write
// is detached from ctx, which may be a client's.
func (m *Manager) persistUse(ctx context.Context, touched map[int64]time.Time) {
	if len(touched) == 0 || m.cat.NodeLost() { // a lost node's writes are refused (node.go)
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := m.cat.Touch(wctx, touched); err != nil {
		m.log.Warn("record last use; the next pass tries again", zap.Error(err))
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range m.branches {
		if t, ok := touched[b.rec.ID]; ok && b.rec.ID != 0 {
			b.persistedUse = t
		}
	}
}

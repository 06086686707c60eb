package branches

import (
	"context"
	"errors"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/overlay"
	"go.uber.org/zap"
)

// fencedOut handles a write the catalog refused because the branch's row is no
// longer this node's (catalog.ErrFenced): another process registered as this node
// since, or the branch was declared lost. Retrying would not help and must not
// be tried; the local server, whose data the catalog no longer vouches for, is
// stopped and unmounted (its sessions end), its files are kept, and the branch
// refuses sessions until serve restarts. A branch the catalog declared lost
// (catalog.ErrLost) is recorded so instead: it refuses sessions with ErrLost and
// can be destroyed. Only the goroutine running b's operation calls it.
func (m *Manager) fencedOut(ctx context.Context, b *branch, cause error) {
	m.mu.Lock()
	if errors.Is(cause, ErrLost) {
		b.rec.State = catalog.Lost
	} else {
		b.fenced = true
	}
	rec := b.rec
	m.mu.Unlock()
	m.log.Error("branch is no longer this node's; stopping its local server and serving it no more",
		zap.String("source", rec.Source), zap.String("branch", rec.Name), zap.Error(cause))
	m.stopLocal(ctx, b)
}

// stopLocal stops b's server and unmounts it without writing to the catalog, for a
// branch whose row this node may not change. Only the goroutine running b's
// operation, or Close, calls it.
func (m *Manager) stopLocal(ctx context.Context, b *branch) {
	m.closeIdle(b)
	inst, rec := m.takeInstance(b)
	if inst != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StopTimeout)
		if err := inst.Stop(sctx); err != nil {
			m.log.Warn("stop a branch's server", zap.String("branch", rec.Name), zap.Error(err))
		}
		cancel()
	}
	if err := overlay.Unmount(m.layoutOf(rec.ID).data); err != nil {
		m.log.Warn("unmount a branch", zap.String("branch", rec.Name), zap.Error(err))
	}
}

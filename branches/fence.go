package branches

import (
	"context"
	"errors"
	"fmt"
	"sync"

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
// can be destroyed. When the refusal was the node's (catalog.ErrNodeLost),
// leaveNode does the same for every other branch. Only the goroutine running b's
// operation calls it.
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

// leaveNode handles the loss of this server's node registration, wherever the
// catalog found it (a heartbeat, or any write the registration fences: see
// catalog.Lost): every branch is refused from now on, and every branch server is
// stopped and unmounted without a catalog write, which ends its sessions (the
// server's shutdown sends them 57P01). Files, seeds and every row stay as they
// are: the registration that replaced this one, or the janitor, owns them now.
// Each server is stopped by an operation of its branch, after the one in flight;
// leaveNode returns when they are done or ctx ends (Close). Only the heartbeat
// goroutine calls it.
func (m *Manager) leaveNode(ctx context.Context) {
	node, epoch, _ := m.cat.Registration()
	m.log.Error("this node lost its registration in the catalog (registered again elsewhere, or declared dead): "+
		"stopping every branch server; nothing is served until serve is restarted", zap.String("node", node), zap.Int64("epoch", epoch))
	var keys []key
	m.mu.Lock()
	for k, b := range m.branches {
		b.fenced = true
		if b.inst != nil || b.op != nil || b.rec.State == catalog.Running {
			keys = append(keys, k)
		}
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := m.do(ctx, k, "node lost", nil, func(ctx context.Context, b *branch) error {
				m.stopLocal(ctx, b)
				return nil
			})
			if err != nil && ctx.Err() == nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrClosed) {
				m.log.Warn("stop a branch's server after the node's registration was lost", zap.String("branch", k.name), zap.Error(err))
			}
		}()
	}
	wg.Wait()
	m.log.Info("branch servers stopped after the node's registration was lost", zap.Int("branches", len(keys)))
}

// fencedErr is the refusal of a session on a fenced branch: ErrNodeLost when the
// whole node's registration is gone, ErrFenced when only the branch's row moved.
func (m *Manager) fencedErr(name string) error {
	if m.cat.NodeLost() {
		return fmt.Errorf("branch %q: %w: %w", name, ErrNodeLost, ErrFenced)
	}
	return fmt.Errorf("branch %q: %w", name, ErrFenced)
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

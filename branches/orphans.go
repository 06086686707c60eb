package branches

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/overlay"
	"go.uber.org/zap"
)

// A node's branch can lose its catalog row while the node runs it: a failover
// of the catalog to an asynchronous standby that had not received the row's
// insert (or received a later delete the node never made). Nothing then routes
// to the branch by the catalog, and a front that asks for the name places it
// as new, perhaps on another node: the same name would run twice. So the
// reaper compares the node's branches with the catalog's rows of the node
// (dropOrphans) and removes each branch whose row is gone: its server stopped
// (its sessions end with 57P01), its mount and directory removed, nothing
// written to the catalog. The name is then free to be created again from its
// source's seed. A branch being created, or in any other operation, is
// compared at the next pass, after it.

// orphanEvery is the longest time between two comparisons while the catalog
// answers; a heartbeat that succeeds again after failing, and a registration
// made again (Reregister), ask for one at once.
const orphanEvery = NodeTTL

// askOrphanCheck asks the reaper to compare the node's branches with the
// catalog at its next pass, and kicks it.
func (m *Manager) askOrphanCheck() {
	m.orphanDue.Store(true)
	m.kickReaper()
}

// maybeDropOrphans runs dropOrphans when one was asked for or the last is
// orphanEvery old, on a Postgres catalog (a SQLite file does not fail over).
// Only the reaper's loop calls it.
func (m *Manager) maybeDropOrphans(ctx context.Context) {
	if m.cat.Backend() != "postgres" || !m.orphanDue.Swap(false) && time.Since(m.orphansAt) < orphanEvery {
		return
	}
	if err := m.dropOrphans(ctx); err != nil {
		m.orphanDue.Store(true) // the next pass tries again
		m.log.Debug("compare the node's branches with the catalog", zap.Error(err))
		return
	}
	m.orphansAt = time.Now()
}

// dropOrphans removes the branches of this node whose catalog row is gone
// (orphanRemove). A branch counts only if it was idle of operations with a row
// id before the catalog was read: a creation inserts its row before the branch
// gets its id, so a row a read misses was gone before it.
func (m *Manager) dropOrphans(ctx context.Context) error {
	me, _, ok := m.cat.Registration()
	if !ok || m.cat.NodeLost() {
		return nil
	}
	suspects := map[int64]key{}
	lost := map[int64]bool{}
	m.mu.Lock()
	for k, b := range m.branches {
		if b.rec.ID != 0 && b.op == nil && !b.fenced {
			suspects[b.rec.ID] = k
			lost[b.rec.ID] = b.rec.State == catalog.Lost
		}
	}
	m.mu.Unlock()
	if len(suspects) == 0 {
		return nil
	}
	rows, err := m.cat.RowsOf(ctx, me)
	if err != nil {
		return err
	}
	for id, k := range suspects {
		if r, ok := rows[id]; ok && r.Source == k.source && r.Name == k.name {
			continue
		}
		// Not among this node's rows: gone, or (not by anything this node
		// does) given to another node, whose fence then refuses this one.
		r, node, err := m.cat.RowOf(ctx, id)
		switch {
		case errors.Is(err, catalog.ErrNotFound):
			m.orphanRemove(ctx, k, id, "no catalog row has its id")
		case err != nil:
			return err
		case r.Source != k.source || r.Name != k.name:
			m.orphanRemove(ctx, k, id, fmt.Sprintf("its id is branch %q of source %q in the catalog", r.Name, r.Source))
		case lost[id]:
			// A lost row of another node, which any node may hold (reconcile).
		case node != me:
			m.log.Warn("a branch's catalog row is another node's; this node serves it until its next write is refused",
				zap.String("source", k.source), zap.String("branch", k.name), zap.String("row_node", node))
		}
	}
	return nil
}

// orphanRemove stops and removes the branch k, whose row id is gone (why), as
// an operation of its own; a branch that is not the same one by then (its
// name destroyed and created again) is left alone.
func (m *Manager) orphanRemove(ctx context.Context, k key, id int64, why string) {
	err := m.do(ctx, k, "orphan", func(b *branch) error {
		if b.rec.ID != id || b.fenced {
			return fmt.Errorf("branch %q is not row %d any more: %w", k.name, id, ErrNotFound)
		}
		return nil
	}, func(ctx context.Context, b *branch) error {
		m.mu.Lock()
		running, sessions, lost := b.inst != nil, b.sessions, b.rec.State == catalog.Lost
		m.mu.Unlock()
		if lost {
			// Not the catalog's loss: the row was destroyed, or made again from
			// the seed by a front, through another process.
			m.log.Info("forgetting a lost branch whose catalog row was removed elsewhere",
				zap.String("source", k.source), zap.String("branch", k.name), zap.Int64("id", id), zap.String("why", why))
		} else {
			m.log.Warn("removing a branch whose catalog row is gone (the catalog lost it, as a failover to a standby that had not received it does): "+
				"its server stopped, its files removed; the name is created again from its source's seed on its next connection",
				zap.String("source", k.source), zap.String("branch", k.name), zap.Int64("id", id), zap.String("why", why),
				zap.Bool("running", running), zap.Int("sessions", sessions))
		}
		m.closeIdle(b)
		if inst, _ := m.takeInstance(b); inst != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StopTimeout)
			_ = inst.Discard(sctx) // the files go next
			cancel()
		}
		l := m.layoutOf(id)
		if err := overlay.Unmount(l.data); err != nil {
			return fmt.Errorf("unmount orphan branch %q: %w", k.name, err)
		}
		if err := os.RemoveAll(l.dir); err != nil {
			return fmt.Errorf("remove the directory of orphan branch %q: %w", k.name, err)
		}
		m.forget(b)
		m.collectLayers(ctx)
		m.collectSeeds(ctx)
		return nil
	})
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrClosed) && ctx.Err() == nil {
		m.log.Warn("remove a branch whose catalog row is gone", zap.String("branch", k.name), zap.Error(err))
	}
}

// lostRowGone reports whether the lost branch k, row id, which this node holds
// (reconcile loads every node's lost rows), has lost its row: destroyed, or
// made again from the seed by a front, through another process. It then
// forgets the branch, so that the name can be created here at once rather than
// refused as lost until the reaper's next comparison.
func (m *Manager) lostRowGone(ctx context.Context, k key, id int64) bool {
	if !m.cfg.Join {
		return false
	}
	if _, _, err := m.cat.RowOf(ctx, id); !errors.Is(err, catalog.ErrNotFound) {
		return false
	}
	m.orphanRemove(ctx, k, id, "its lost row was removed")
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.branches[k]
	return b == nil || b.rec.ID != id
}

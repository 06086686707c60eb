package branches

import (
	"context"
	"errors"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// NodeTTL is how long a heartbeat keeps this server's node registration alive in
// the catalog; heartbeats go every NodeTTL/3, so two may fail (a catalog restart,
// a slow network) before the lease runs out. The janitor waits
// Config.NodeDeadAfter (default 60 s, ten leases) beyond that before it declares a
// node dead, so the lease's length decides how fresh `node ls` is, not how soon
// a node is given up.
const NodeTTL = 6 * time.Second

// janitorEvery is how many heartbeats go between two janitor passes.
const janitorEvery = 3

// registerNode registers this server as the node named by the state directory's
// id (bindCatalog wrote it), before reconcile, so that every branch write from
// then on, reconcile's included, is fenced by the new epoch.
func registerNode(ctx context.Context, cat *catalog.Catalog, stateDir string, log *zap.Logger) error {
	id, err := ReadStateID(stateDir)
	if err != nil {
		return err
	}
	n, err := cat.Register(ctx, id, "", NodeTTL)
	if err != nil {
		return err
	}
	log.Info("node registered", zap.String("node", n.ID), zap.Int("slot", n.Slot), zap.Int64("epoch", n.Epoch))
	return nil
}

// heartbeat renews the node's lease every NodeTTL/3 (and when the proxy's address
// is set), and runs the janitor every janitorEvery beats, until ctx ends or the
// catalog finds the registration gone (by a heartbeat or by any fenced write):
// then it stops every branch server (leaveNode) and ends, since a lost node
// writes nothing more to the catalog, the janitor's sweeps included.
func (m *Manager) heartbeat(ctx context.Context) {
	defer close(m.beatDone)
	t := time.NewTicker(NodeTTL / 3)
	defer t.Stop()
	lost := m.cat.Lost()
	failing := false
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-lost:
			m.leaveNode(ctx)
			m.askRestart(ctx)
			return
		case <-t.C:
		case <-m.beatKick:
		}
		failing = m.beat(ctx, failing)
		if n%janitorEvery == 0 {
			m.sweep(ctx)
		}
	}
}

// beat sends one heartbeat. A failure is logged when it starts and when it ends;
// the next beat retries. A heartbeat that finds the registration gone is final
// until serve starts again: the catalog closes its Lost channel, which the
// heartbeat's loop acts on.
func (m *Manager) beat(ctx context.Context, failing bool) bool {
	if m.cat.NodeLost() {
		return failing
	}
	bctx, cancel := context.WithTimeout(ctx, NodeTTL/3)
	defer cancel()
	err := m.cat.Heartbeat(bctx, m.ProxyAddr(), m.PeerAddr(), NodeTTL, m.load())
	switch {
	case errors.Is(err, catalog.ErrNodeLost):
		return false // leaveNode logs it
	case errors.Is(err, catalog.ErrRolledBack):
		return m.registerAgain(bctx, err)
	case err != nil:
		if !failing && ctx.Err() == nil {
			m.log.Warn("node heartbeat failed; retrying", zap.Error(err))
		}
		return true
	case failing:
		m.log.Info("node heartbeat succeeded again")
		m.askOrphanCheck() // the catalog may have failed over and lost rows
	}
	return false
}

// registerAgain registers the node again after its heartbeat found the
// registration rolled back (cause: catalog.ErrRolledBack), and asks for the
// branches to be compared with the catalog, which lost rows with it. It
// reports whether the heartbeat is still failing.
func (m *Manager) registerAgain(ctx context.Context, cause error) bool {
	n, before, err := m.cat.Reregister(ctx, m.ProxyAddr(), NodeTTL)
	if err != nil {
		if !errors.Is(err, catalog.ErrNodeLost) && ctx.Err() == nil {
			m.log.Warn("register the node again after the catalog lost its registration; retrying", zap.Error(err))
		}
		return true
	}
	m.log.Warn("the catalog had lost this node's registration (a failover to a standby that had not received it): "+
		"registered again, its branches adopted; serving on", zap.String("node", n.ID), zap.Int64("epoch_before", before),
		zap.Int64("epoch", n.Epoch), zap.Int("slot", n.Slot), zap.NamedError("found", cause))
	m.askOrphanCheck()
	m.kickHeartbeat() // its peer address and load, which Reregister does not write
	return false
}

// load is what the heartbeat reports.
func (m *Manager) load() catalog.Load {
	m.mu.Lock()
	l := catalog.Load{Running: m.running.Len(), MaxRunning: m.cfg.Policy.MaxRunning}
	m.mu.Unlock()
	var st unix.Statfs_t
	if unix.Statfs(m.cfg.StateDir, &st) == nil {
		l.FreeBytes = int64(st.Bavail) * int64(st.Bsize)
	}
	return l
}

// sweep runs one janitor pass over the catalog's nodes.
func (m *Manager) sweep(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, NodeTTL)
	defer cancel()
	s, err := m.cat.Janitor(sctx, m.cfg.NodeDeadAfter)
	switch {
	case err != nil:
		if ctx.Err() == nil && !errors.Is(err, catalog.ErrUnavailable) {
			m.log.Warn("node janitor", zap.Error(err))
		}
	case len(s.Dead) > 0:
		m.log.Warn("declared nodes dead: no heartbeat for node-dead-after", zap.Strings("nodes", s.Dead),
			zap.Int("branches_lost", s.Lost), zap.Int("creating_deleted", s.Deleted), zap.Duration("node_dead_after", m.cfg.NodeDeadAfter))
	}
}

// kickHeartbeat asks for a heartbeat soon, without blocking.
func (m *Manager) kickHeartbeat() {
	select {
	case m.beatKick <- struct{}{}:
	default:
	}
}

// NodeInfo describes one node of the catalog, as `node ls --json` prints it.
type NodeInfo struct {
	ID   string `json:"id"`
	Slot int    `json:"slot"`
	Addr string `json:"addr"`
	// PeerAddr is where other nodes copy this node's seeds from; "" for none.
	PeerAddr string `json:"peer_addr,omitempty"`
	Epoch    int64  `json:"epoch"`
	State    string `json:"state"`
	// LeaseUntil is when the lease runs out, by the catalog's clock.
	LeaseUntil time.Time `json:"lease_until"`
	// LeaseAgeMS is how long ago the lease ran out, by the catalog's clock;
	// negative while it runs.
	LeaseAgeMS int64        `json:"lease_age_ms"`
	Load       catalog.Load `json:"load"`
	Self       bool         `json:"self"` // this server
}

// Nodes lists the nodes registered in the catalog, by slot.
func (m *Manager) Nodes(ctx context.Context) ([]NodeInfo, error) {
	ns, err := m.cat.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	me, epoch, _ := m.cat.Registration()
	return NodeInfos(ns, me, epoch), nil
}

// NodeInfos describes the catalog's nodes ns as seen by the node me at epoch
// (Self); a front, which is no node, gives "".
func NodeInfos(ns []catalog.Node, me string, epoch int64) []NodeInfo {
	out := make([]NodeInfo, 0, len(ns))
	for _, n := range ns {
		out = append(out, NodeInfo{ID: n.ID, Slot: n.Slot, Addr: n.Addr, PeerAddr: n.PeerAddr, Epoch: n.Epoch, State: string(n.State),
			LeaseUntil: n.LeaseUntil, LeaseAgeMS: n.LeaseAge.Milliseconds(), Load: n.Load, Self: me != "" && n.ID == me && n.Epoch == epoch})
	}
	return out
}

// SetDraining drains the node id, or resumes it (catalog.SetDraining): fronts
// place no new branch on a drained node, and it creates none, while its branches
// go on serving.
func (m *Manager) SetDraining(ctx context.Context, id string, draining bool) error {
	if err := m.cat.SetDraining(ctx, id, draining); err != nil {
		return err
	}
	m.log.Info("node drain", zap.String("node", id), zap.Bool("draining", draining))
	m.kickReaper() // the warm pool: emptied on a drain, filled again on a resume
	return nil
}

// Restart is closed when this node's registration was lost because the
// catalog's janitor declared it dead (it could not renew its lease for
// Config.NodeDeadAfter, cut off from the catalog), once its branch servers are
// stopped: serve then exits for its supervisor to start it again, and the new
// process registers under a new epoch and serves what is still its own. A
// registration taken by another process with this node's id does not close it:
// a restart would only take the id back.
func (m *Manager) Restart() <-chan struct{} { return m.restart }

// askRestart closes Restart if the registration was lost to the janitor,
// reading why until it can or ctx ends.
func (m *Manager) askRestart(ctx context.Context) {
	for logged := false; ; logged = true {
		dead, err := m.cat.DeclaredDead(ctx)
		if errors.Is(err, catalog.ErrNotFound) {
			dead, err = false, nil // no node row: nothing to take back either
		}
		if err == nil {
			if dead {
				close(m.restart)
			} else {
				m.log.Error("another process registered as this node: this one serves nothing until it is restarted, " +
					"which takes the node back; look for a second server on a copy of this state directory")
			}
			return
		}
		if !logged {
			m.log.Warn("read why this node lost its registration; trying again", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(NodeTTL / 3):
		}
	}
}

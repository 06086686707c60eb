package branches

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/failpoint"
	"github.com/pgbranchproxy/pgbranchproxy/branches/overlay"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"github.com/pgbranchproxy/pgbranchproxy/branches/seed"
	"go.uber.org/zap"
)

// Copy-on-write modes a branch server can run in.
const (
	CowLazyRW = "lazyrw" // the shim is loaded: reads never copy a file up
	CowEager  = "eager"  // plain OverlayFS: opening a file read-write copies it up
)

// startOp starts fn as b's operation, detached from any caller's context. m.mu must
// be held and b.op must be nil.
func (m *Manager) startOp(b *branch, what string, fn func(ctx context.Context) error) *op {
	o := &op{what: what, done: make(chan struct{})}
	b.op = o
	b.ops++
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.CreateTimeout)
		defer cancel()
		err := fn(ctx)
		m.mu.Lock()
		o.err = err
		if b.op == o {
			b.op = nil
		}
		m.signalRoomLocked()
		m.mu.Unlock()
		close(o.done)
	}()
	return o
}

// do runs fn as an operation on the branch k once any operation in flight has ended,
// and waits for it. check, if set, runs under the lock first and can refuse.
func (m *Manager) do(ctx context.Context, k key, what string, check func(*branch) error, fn func(context.Context, *branch) error) error {
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return ErrClosed
		}
		b := m.branches[k]
		if b == nil {
			m.mu.Unlock()
			return fmt.Errorf("branch %q of source %q: %w", k.name, k.source, ErrNotFound)
		}
		if o := b.op; o != nil {
			m.mu.Unlock()
			if err := wait(ctx, o); err != nil && ctx.Err() != nil {
				return err
			}
			continue
		}
		if check != nil {
			if err := check(b); err != nil {
				m.mu.Unlock()
				return err
			}
		}
		o := m.startOp(b, what, func(ctx context.Context) error { return fn(ctx, b) })
		m.mu.Unlock()
		return wait(ctx, o)
	}
}

// wait waits for o, returning its error, or ctx's.
func wait(ctx context.Context, o *op) error {
	select {
	case <-o.done:
		return o.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeFailed returns the error of a write of branch b's row (name) that failed
// with err, fencing b when the row is not this node's any more, either alone or
// because the node's registration is gone (ErrNodeLost is also ErrFenced).
func (m *Manager) writeFailed(ctx context.Context, b *branch, name string, err error) error {
	if errors.Is(err, ErrFenced) {
		m.fencedOut(ctx, b, err)
	}
	if errors.Is(err, ErrLost) {
		// Only ErrLost, which fencedOut logged with its cause: the client
		// must learn that the branch is lost, not that it was fenced.
		return fmt.Errorf("record branch %q: %w", name, ErrLost)
	}
	return fmt.Errorf("record branch %q: %w", name, err)
}

// catalogWriteTimeout bounds one recorded state change.
const catalogWriteTimeout = 30 * time.Second

// save writes b's record with the changes made by mutate, logging a transition when
// the state changes. Only the goroutine running b's operation calls it.
func (m *Manager) save(ctx context.Context, b *branch, reason string, mutate func(*catalog.Branch)) error {
	m.mu.Lock()
	rec := b.rec
	m.mu.Unlock()
	prev := rec.State
	mutate(&rec)
	if rec.State != prev {
		rec.StateAt = m.now()
	}
	// Detached from the caller (a state change is recorded once begun), but
	// bounded: a catalog that stops answering must not hold a stop forever.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), catalogWriteTimeout)
	err := m.cat.UpdateBranch(wctx, rec, reason)
	cancel()
	if err != nil {
		return m.writeFailed(ctx, b, rec.Name, err)
	}
	m.mu.Lock()
	rec.LastUsedAt = b.rec.LastUsedAt // sessions update it concurrently
	rec.HadSession = b.rec.HadSession // so does a first session's record (UpdateBranch leaves it)
	b.rec = rec
	m.mu.Unlock()
	if rec.State != prev {
		m.log.Info("branch state", zap.String("source", rec.Source), zap.String("branch", rec.Name),
			zap.String("from", string(prev)), zap.String("to", string(rec.State)), zap.String("reason", reason))
		return m.fault(failpoint.Catalog+string(rec.State), b)
	}
	return nil
}

// fault runs the failpoints of point for b (tests only; a nil set returns at once).
func (m *Manager) fault(point string, b *branch) error {
	if m.cfg.Failpoints == nil {
		return nil
	}
	m.mu.Lock()
	name, pid := b.rec.Name, 0
	if b.inst != nil {
		pid = b.inst.PID()
	}
	m.mu.Unlock()
	return m.cfg.Failpoints.Hit(point, name, pid)
}

// create makes the branch's directories, mounts it and starts its server. On failure
// everything it did is undone and the name is free again.
func (m *Manager) create(ctx context.Context, b *branch, reason string) (err error) {
	defer func() { err = m.noSpace(err) }()
	start := time.Now()
	select {
	case m.creating <- struct{}{}:
		defer func() { <-m.creating }()
	case <-ctx.Done():
		m.forget(b)
		return fmt.Errorf("wait for a creation slot: %w", ctx.Err())
	}
	m.mu.Lock()
	rec := b.rec
	m.mu.Unlock()
	rec.State, rec.CreatedAt, rec.StateAt, rec.LastUsedAt = catalog.Creating, m.now(), m.now(), m.now()
	// A new branch of a seed has the seed's roles and databases: its row holds
	// them from the start, and its new server is not asked for them.
	rolesKnown := false
	if sd, err := m.seedByID(rec.SeedID); err == nil && rec.Parent == "" && sd.Roles != "" {
		rec.Roles, rec.Databases, rolesKnown = sd.Roles, sd.Databases, true
	}
	id, err := m.cat.InsertBranch(context.WithoutCancel(ctx), rec, reason)
	switch {
	case errors.Is(err, catalog.ErrExists):
		err = fmt.Errorf("%w (on another node): %w", ErrExists, err) // two nodes raced for the name
	case errors.Is(err, catalog.ErrNoSource):
		// The source was removed (on another node, whose removal this insert waited
		// for): the client is told of an unknown source, as for one never added.
		err = fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		m.forget(b)
		return fmt.Errorf("record new branch: %w", err)
	}
	rec.ID = id
	rec.NodeID, rec.NodeEpoch, _ = m.cat.Registration() // what InsertBranch recorded
	m.mu.Lock()
	b.rec = rec
	m.mu.Unlock()
	defer func() {
		if err != nil {
			m.rollbackCreate(b, err)
		}
	}()
	if err := m.fault(failpoint.Catalog+string(catalog.Creating), b); err != nil {
		return err
	}
	l := m.layoutOf(id)
	if err := os.Mkdir(l.dir, 0o711); err != nil {
		return fmt.Errorf("make branch directory: %w", err)
	}
	if rec.Parent != "" {
		if err := m.fork(ctx, b, rec.Parent); err != nil {
			return err
		}
	}
	// create_ms is written with the running state: one write, not two.
	created := func(r *catalog.Branch) { r.CreateMS = time.Since(start).Milliseconds() }
	if err := m.startServerWith(ctx, b, serverReady{also: created, rolesKnown: rolesKnown}); err != nil {
		return err
	}
	m.cfg.Metrics.action("create", "first_use")
	m.cfg.Metrics.took("create", time.Since(start))
	m.log.Info("branch created", zap.String("source", rec.Source), zap.String("branch", rec.Name),
		zap.Duration("took", time.Since(start)), zap.String("cow_mode", b.rec.CowMode))
	return nil
}

// takeInstance detaches b's running server, if any, from b and from the running
// set, and returns it with b's record; the caller stops or discards it.
func (m *Manager) takeInstance(b *branch) (runtime.Instance, catalog.Branch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	inst, rec := b.inst, b.rec
	b.inst = nil
	m.running.Remove(key{rec.Source, rec.Name})
	return inst, rec
}

func (m *Manager) rollbackCreate(b *branch, cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.StopTimeout)
	defer cancel()
	inst, rec := m.takeInstance(b)
	if inst != nil {
		_ = inst.Discard(ctx) // the branch's files go next
	}
	l := m.layoutOf(rec.ID)
	if err := overlay.Unmount(l.data); err != nil {
		m.log.Error("roll back branch creation: unmount", zap.String("branch", rec.Name), zap.Error(err))
		return // keep the row: reconcile will try again
	}
	os.RemoveAll(l.dir)
	if err := m.cat.DeleteBranch(ctx, rec, "creation failed: "+cause.Error()); err != nil {
		m.log.Error("roll back branch creation: catalog", zap.String("branch", rec.Name), zap.Error(err))
	}
	m.forget(b)
	m.collectLayers(ctx)
}

// forget drops b from the live map.
func (m *Manager) forget(b *branch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{b.rec.Source, b.rec.Name}
	if m.branches[k] == b {
		delete(m.branches, k)
	}
}

// layersPresent checks that every read-only layer is a directory on this disk.
func layersPresent(layers []string) error {
	for _, l := range layers {
		if fi, err := os.Stat(l); err != nil || !fi.IsDir() {
			return fmt.Errorf("%w: %s", ErrLayerMissing, l)
		}
	}
	return nil
}

// startFailed records that the start of b's server failed with cause: the branch
// is stopped (its next session tries again), unmounted, and branch ls says why,
// rather than starting for ever. A server that did start is the exit watcher's.
func (m *Manager) startFailed(ctx context.Context, b *branch, l layout, cause error) {
	m.mu.Lock()
	started := b.inst != nil
	m.mu.Unlock()
	if started {
		return
	}
	if err := overlay.Unmount(l.data); err != nil {
		m.log.Warn("unmount after a failed start", zap.String("branch", b.rec.Name), zap.Error(err))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), catalogWriteTimeout)
	defer cancel()
	if err := m.save(ctx, b, "start failed", func(r *catalog.Branch) { r.State, r.Error = catalog.Stopped, cause.Error() }); err != nil {
		m.log.Warn("record a failed start", zap.String("branch", b.rec.Name), zap.Error(err))
	}
}

// startServer mounts the branch if needed and starts its Postgres.
func (m *Manager) startServer(ctx context.Context, b *branch) error {
	return m.startServerWith(ctx, b, serverReady{})
}

// serverReady is what a start records beyond the running state.
type serverReady struct {
	// also sets more of the row in the same write (a creation's create_ms).
	also func(*catalog.Branch)
	// rolesKnown: the row already holds the server's roles and databases (a new
	// branch of a seed holds the seed's), so the new server is not asked.
	rolesKnown bool
}

// startServerWith is startServer, recording ready with the running state.
func (m *Manager) startServerWith(ctx context.Context, b *branch, ready serverReady) (err error) {
	defer func() { err = m.noSpace(err) }()
	m.mu.Lock()
	rec := b.rec
	m.mu.Unlock()
	seedRec, err := m.seedByID(rec.SeedID)
	if err != nil {
		return err
	}
	l := m.layoutOf(rec.ID)
	if rec.State != catalog.Creating {
		if err := m.save(ctx, b, "start", func(r *catalog.Branch) { r.State = catalog.Starting }); err != nil {
			return err
		}
		defer func() {
			if err != nil {
				m.startFailed(ctx, b, l, err)
			}
		}()
	}
	if err := m.mountBranch(ctx, b, rec, seedRec, l); err != nil {
		return err
	}
	spec, err := m.serverSpec(rec, seedRec, l)
	if err != nil {
		return err
	}
	if err := m.placeServer(ctx, rec, &spec); err != nil {
		return err
	}
	if err := m.fault(failpoint.PGStart, b); err != nil {
		return err
	}
	inst, err := m.cfg.Runtime.Start(ctx, spec)
	if err != nil {
		return fmt.Errorf("start branch %q: %w: %w", rec.Name, ErrStartFailed, err)
	}
	mode := m.cowMode(l, rec.Name)
	m.mu.Lock()
	b.inst = inst
	m.running.Add(key{rec.Source, rec.Name}, struct{}{})
	m.mu.Unlock()
	go m.watchExit(b, inst)
	if err := m.save(ctx, b, "server ready", func(r *catalog.Branch) {
		r.State, r.PID, r.CowMode, r.Error = catalog.Running, inst.PID(), mode, ""
		if ready.also != nil {
			ready.also(r)
		}
	}); err != nil {
		return err
	}
	if !ready.rolesKnown {
		if err := m.refreshRoles(ctx, b); err != nil {
			m.log.Warn("read branch roles", zap.String("branch", rec.Name), zap.Error(err))
		}
	}
	m.mu.Lock()
	b.rolesAt = m.now()
	m.mu.Unlock()
	return nil
}

// mountBranch mounts b's layers at its data directory, unless they are mounted:
// the seed pulled here first if another node built it, and a new branch of a
// seed given the seed's last WAL segment.
func (m *Manager) mountBranch(ctx context.Context, b *branch, rec catalog.Branch, seedRec catalog.Seed, l layout) error {
	u := m.cfg.User
	if mounted, err := overlay.IsMounted(l.data); err != nil {
		return err
	} else if !mounted {
		if err := m.fault(failpoint.Mount, b); err != nil {
			return err
		}
		if n := len(rec.Layers); n > 0 && rec.Layers[n-1] == m.seedLayer(seedRec) {
			if err := m.ensureSeed(ctx, seedRec); err != nil {
				return err
			}
		}
		if err := layersPresent(rec.Layers); err != nil {
			return err
		}
		if len(rec.Layers) == 1 && rec.Layers[0] == m.seedLayer(seedRec) {
			if err := presetWAL(rec.Layers[0], l.upper, filepath.Join(l.dir, "wal.tmp"), u.UID, u.GID); err != nil {
				m.log.Warn("copy the seed's WAL segment to a new branch", zap.String("branch", rec.Name), zap.Error(err))
			}
		}
		if err := overlay.Mount(overlay.Layout{Lower: rec.Layers, Upper: l.upper, Work: l.work, Merged: l.data}, u.UID, u.GID); err != nil {
			return err
		}
	}
	return nil
}

// serverSpec is how b's server starts: its run directory made, its access
// rules written, and the settings of a branch, a pool member and the operator.
func (m *Manager) serverSpec(rec catalog.Branch, seedRec catalog.Seed, l layout) (runtime.Spec, error) {
	u := m.cfg.User
	if err := os.MkdirAll(l.run, 0o700); err != nil {
		return runtime.Spec{}, err
	}
	if err := os.Chown(l.run, u.UID, u.GID); err != nil {
		return runtime.Spec{}, err
	}
	hba, ident, err := seed.WriteTrustHBA(l.dir)
	if err != nil {
		return runtime.Spec{}, err
	}
	// Reconcile has stopped every server of this state directory, and operations on a
	// branch are serialised, so a lock file here is stale. Postgres would take one
	// whose pid is alive again (a zombie's, or reused after a restart in a new pid
	// namespace) for another server's and refuse to start.
	os.Remove(filepath.Join(l.data, "postmaster.pid"))
	removeSocketLocks(l.run)
	os.Remove(l.probe())
	settings := seed.ServerSettings(hba, ident)
	if rec.Pooled { // without autovacuum until claimed (poolvacuum.go)
		conf, err := m.poolConf(l.dir, l.data)
		if err != nil {
			return runtime.Spec{}, err
		}
		if conf != "" {
			settings["config_file"] = conf
		}
	} else {
		os.Remove(filepath.Join(l.dir, poolConfName))
	}
	// Recycled WAL segments count against a branch's quota: keep fewer than the
	// default 80MB worth. --pg-setting can say otherwise.
	settings["min_wal_size"] = "32MB"
	maps.Copy(settings, seed.InPlaceSettings(l.data))
	for k, v := range m.cfg.Settings {
		settings[k] = v
	}
	spec := runtime.Spec{
		Name:      serverName(rec.Source, rec.Name),
		Version:   seedRec.PGVersion,
		DataDir:   l.data,
		SocketDir: l.run,
		LogFile:   l.log,
		Settings:  settings,
	}
	if m.cfg.ShimPath != "" {
		spec.Env = []string{"LD_PRELOAD=" + m.cfg.ShimPath, "LAZYRW_PROBE_FILE=" + l.probe()}
	}
	return spec, nil
}

// cowMode says whether the lazyrw shim loaded in the server just started: it
// writes a probe file when it does.
func (m *Manager) cowMode(l layout, name string) string {
	if _, err := os.Stat(l.probe()); err == nil {
		return CowLazyRW
	}
	if m.cfg.ShimPath != "" {
		m.log.Warn("lazyrw shim did not load; branch runs eager (reads copy files up)",
			zap.String("branch", name), zap.String("shim", m.cfg.ShimPath))
	}
	return CowEager
}

// watchExit records a server that exits while the branch is meant to be running.
// An exit during an operation on the branch is recorded once that operation ends,
// unless the operation stopped or replaced the server itself.
func (m *Manager) watchExit(b *branch, inst runtime.Instance) {
	<-inst.Done()
	for {
		m.mu.Lock()
		if b.inst != inst || m.closed {
			m.mu.Unlock()
			return
		}
		if o := b.op; o != nil {
			m.mu.Unlock()
			<-o.done
			continue
		}
		o := m.recordExitLocked(b)
		m.mu.Unlock()
		<-o.done
		return
	}
}

// serverExited reports whether b's server has exited without the exit being
// recorded yet. m.mu is held.
func serverExited(b *branch) bool {
	if b.inst == nil {
		return false
	}
	select {
	case <-b.inst.Done():
		return true
	default:
		return false
	}
}

// recordExitLocked starts the operation that records the exit of b's server: it
// unmounts the branch and marks it stopped, so the next session starts it again.
// m.mu is held, b.op is nil and serverExited(b) holds.
func (m *Manager) recordExitLocked(b *branch) *op {
	b.inst = nil
	m.running.Remove(key{b.rec.Source, b.rec.Name})
	return m.startOp(b, "record exit", func(ctx context.Context) error {
		m.closeIdle(b)
		l := m.layoutOf(b.rec.ID)
		m.log.Error("branch server exited unexpectedly", zap.String("branch", b.rec.Name),
			zap.String("log", runtime.LogTail(l.log, 3)))
		m.endOrphans(ctx, l.data)
		if err := m.fault(failpoint.Unmount, b); err != nil {
			return err
		}
		if err := overlay.Unmount(l.data); err != nil {
			return err
		}
		return m.save(ctx, b, "server exited", func(r *catalog.Branch) { r.State, r.PID = catalog.Stopped, 0 })
	})
}

// stopBranch stops the branch's server cleanly and unmounts it, keeping its data.
func (m *Manager) stopBranch(ctx context.Context, b *branch, reason string) error {
	m.closeIdle(b)
	m.mu.Lock()
	inst, rec := b.inst, b.rec
	m.mu.Unlock()
	if rec.State == catalog.Stopped && inst == nil {
		return nil
	}
	if err := m.refreshRoles(ctx, b); err != nil {
		m.log.Warn("read branch roles before stop", zap.String("branch", rec.Name), zap.Error(err))
	}
	if err := m.save(ctx, b, reason, func(r *catalog.Branch) { r.State = catalog.Stopping }); err != nil {
		return err
	}
	if inst != nil {
		if err := m.fault(failpoint.PGStop, b); err != nil {
			return err
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StopTimeout)
		err := inst.Stop(sctx)
		cancel()
		if err != nil {
			m.log.Warn("branch server did not stop cleanly", zap.String("branch", rec.Name), zap.Error(err))
		}
		m.mu.Lock()
		b.inst = nil
		m.running.Remove(key{rec.Source, rec.Name})
		m.mu.Unlock()
	}
	l := m.layoutOf(rec.ID)
	if err := m.fault(failpoint.Unmount, b); err != nil {
		return err
	}
	if err := overlay.Unmount(l.data); err != nil {
		return err
	}
	owned, _ := m.measure(b, l.upper)
	return m.save(ctx, b, reason, func(r *catalog.Branch) { r.State, r.PID, r.OwnedBytes = catalog.Stopped, 0, owned })
}

// resetBranch throws away the branch's writes, back to its base; a branch that was
// running is started again.
func (m *Manager) resetBranch(ctx context.Context, b *branch, reason string) error {
	m.mu.Lock()
	wasRunning := b.inst != nil
	m.mu.Unlock()
	if err := m.resetStopped(ctx, b, reason); err != nil {
		return err
	}
	if wasRunning {
		return m.startServer(ctx, b)
	}
	return nil
}

// evictBranch resets the branch and leaves it stopped: restarted, an idle server
// would write its own files into the layer again, and the next pass over the disk
// budget would evict it once more, for nothing. The next connection starts it.
func (m *Manager) evictBranch(ctx context.Context, b *branch, reason string) error {
	return m.resetStopped(ctx, b, reason)
}

// resetStopped stops the branch and throws away its writes, back to its base.
func (m *Manager) resetStopped(ctx context.Context, b *branch, reason string) error {
	if err := m.stopBranch(ctx, b, reason); err != nil {
		return err
	}
	if err := m.save(ctx, b, reason, func(r *catalog.Branch) { r.State = catalog.Resetting }); err != nil {
		return err
	}
	if err := m.clearUpper(b.rec.ID); err != nil {
		return err
	}
	// Back to the base's roles; a branch of a branch keeps those read at the fork.
	if err := m.save(ctx, b, reason, func(r *catalog.Branch) {
		r.State, r.OwnedBytes = catalog.Stopped, 0
		if r.Parent == "" {
			r.Roles, r.Databases = "", nil
		}
	}); err != nil {
		return err
	}
	// Empty again: new sessions need not wait for the reaper's next measure.
	m.mu.Lock()
	b.overQuota, b.measuredAt = false, m.now()
	m.mu.Unlock()
	return nil
}

func (m *Manager) clearUpper(id int64) error {
	l := m.layoutOf(id)
	for _, d := range []string{l.upper, l.work} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("clear branch layer: %w", err)
		}
	}
	return nil
}

// destroyBranch stops the branch, removes its directories and its catalog row. A
// lost branch's row is no node's to change, but any node may delete it. A fenced
// branch is refused before its files are touched: its row is not this node's to
// delete (fence.go).
func (m *Manager) destroyBranch(ctx context.Context, b *branch, reason string) error {
	m.closeIdle(b)
	m.mu.Lock()
	lost, fenced, name := b.rec.State == catalog.Lost, b.fenced, b.rec.Name
	m.mu.Unlock()
	if fenced {
		return m.fencedErr(name)
	}
	if !lost {
		if err := m.save(ctx, b, reason, func(r *catalog.Branch) { r.State = catalog.Destroying }); err != nil {
			return err
		}
	}
	m.mu.Lock()
	sessions := b.sessions
	m.mu.Unlock()
	inst, rec := m.takeInstance(b)
	if inst != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StopTimeout)
		if sessions > 0 {
			// Destroyed under its sessions (Force): a fast shutdown tells each
			// client FATAL 57P01, where an immediate one only warns and hangs up.
			_ = inst.Stop(sctx)
		} else {
			// The files go next: a shutdown checkpoint would only write what is deleted.
			_ = inst.Discard(sctx)
		}
		cancel()
	}
	l := m.layoutOf(rec.ID)
	if err := m.fault(failpoint.Unmount, b); err != nil {
		return err
	}
	if err := overlay.Unmount(l.data); err != nil {
		return err
	}
	if err := os.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("remove branch directory: %w", err)
	}
	if err := m.cat.DeleteBranch(context.WithoutCancel(ctx), rec, reason); err != nil {
		return err
	}
	m.forget(b)
	m.collectLayers(ctx)
	m.collectSeeds(ctx)
	m.log.Info("branch destroyed", zap.String("source", rec.Source), zap.String("branch", rec.Name), zap.String("reason", reason))
	return nil
}

var errNoSeed = errors.New("source has no ready seed")

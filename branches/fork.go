package branches

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/failpoint"
	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"go.uber.org/zap"
)

// A branch of a branch gets a read-only layer of its own, a copy of the parent's
// upper layer as of the fork, above the parent's own lower layers. The child reads
// the parent's state through those layers and copies nothing it only reads. Where
// copy-up clones (XFS reflink, btrfs) the copy is a clone too. How the copy is taken
// depends on the parent:
//
//   - stopped: its upper layer is consistent as it is (after a clean shutdown, or a
//     crash the child's start recovers from as from any crash) and nothing writes to
//     it, so it is copied without starting the parent (fork_stopped.go). While the
//     parent stays stopped every further fork shares that copy.
//   - running without sessions (or whose sessions end within endingSessionGrace):
//     it is stopped first, as idle stop would, then forked
//     as a stopped parent; the next connection wakes it.
//   - running with sessions: an online, backup-consistent copy taken between
//     pg_backup_start and pg_backup_stop, with the backup_label the child recovers
//     from; the parent's sessions are not disturbed.
//
// A chain deeper than Config.MaxLayers (32 by default), or whose layer paths would
// not fit the page OverlayFS takes its mount options in, gets one layer instead: a
// merged copy of the parent's whole view, seed included (flattened).

// defaultMaxLayers is how many read-only layers a branch is mounted with at most,
// unless Config.MaxLayers says otherwise: the seed and 31 fork layers.
const defaultMaxLayers = 32

// maxOptionBytes keeps the lower layers of a mount well inside the one page the
// kernel accepts for overlay mount options.
const maxOptionBytes = 3072

// mustFlatten reports whether a branch mounted with layers must flatten them.
func (m *Manager) mustFlatten(layers []string) bool {
	limit := m.cfg.MaxLayers
	if limit <= 0 {
		limit = defaultMaxLayers
	}
	return len(layers) > limit || len(strings.Join(layers, ":")) > maxOptionBytes
}

// endingSessionGrace is how long a fork waits for the parent's sessions to end
// before it takes the online path.
const endingSessionGrace = 250 * time.Millisecond

// layersDir holds fork layers, shared by every descendant that lists them; a layer
// is removed when no branch lists it any more.
func (m *Manager) layersDir() string { return filepath.Join(m.cfg.StateDir, "layers") }

// fork sets the read-only layers of the child b from the branch parent.
func (m *Manager) fork(ctx context.Context, b *branch, parent string) error {
	m.mu.Lock()
	child := b.rec
	m.mu.Unlock()
	pk := key{child.Source, parent}
	stopTried, graceEnd := false, time.Now().Add(endingSessionGrace)
	for {
		m.mu.Lock()
		pb := m.branches[pk]
		switch {
		case pb == nil:
			m.mu.Unlock()
			return fmt.Errorf("parent branch %q of source %q: %w", parent, child.Source, ErrNotFound)
		case pb.op != nil:
			o := pb.op
			m.mu.Unlock()
			if err := wait(ctx, o); err != nil && ctx.Err() != nil {
				return fmt.Errorf("parent branch %q: %w", parent, err)
			}
		case pb.inst == nil && pb.rec.State == catalog.Stopped:
			return m.forkStoppedLocked(ctx, b, pb) // unlocks
		case pb.inst != nil && pb.sessions > 0 && time.Now().Before(graceEnd):
			// A client that forks right after closing its session on the parent
			// usually wins the race against the proxy seeing that session end.
			m.mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		case pb.inst != nil && pb.sessions == 0 && !stopTried:
			stopTried = true
			o := m.startOp(pb, "stop", func(ctx context.Context) error {
				return m.stopBranch(ctx, pb, "idle parent stopped to fork "+child.Name)
			})
			m.mu.Unlock()
			if err := wait(ctx, o); err != nil && ctx.Err() != nil {
				return fmt.Errorf("parent branch %q: %w", parent, err)
			}
		default:
			m.mu.Unlock()
			return m.forkOnline(ctx, b, parent)
		}
	}
}

// adopt records the child's layers, taken from its parent prec, in memory and in the
// catalog.
func (m *Manager) adopt(ctx context.Context, b *branch, prec catalog.Branch, layers []string, parentRoles string) error {
	m.mu.Lock()
	b.rec.Layers = layers
	b.rec.SeedID = prec.SeedID
	b.rec.Parent, b.rec.ParentID = prec.Name, prec.ID
	m.mu.Unlock()
	return m.save(ctx, b, "fork layer ready", func(r *catalog.Branch) {
		r.Layers, r.SeedID, r.Parent, r.ParentID, r.Roles = layers, prec.SeedID, prec.Name, prec.ID, parentRoles
	})
}

// forkOnline takes a backup-consistent copy of the running parent's upper layer (or,
// to flatten, of its whole data directory) for the child b.
func (m *Manager) forkOnline(ctx context.Context, b *branch, parent string) error {
	m.mu.Lock()
	child := b.rec
	m.mu.Unlock()
	// A lease keeps the parent running, and safe from reset, stop and destroy, for the
	// length of the copy; it wakes the parent if it was stopped meanwhile.
	lease, err := m.acquireExisting(ctx, router.Route{Branch: parent, Options: router.Options{Source: child.Source}})
	if err != nil {
		return fmt.Errorf("parent branch %q: %w", parent, err)
	}
	defer lease.Release()
	m.mu.Lock()
	prec := lease.b.rec
	m.mu.Unlock()
	sd, err := m.seedByID(prec.SeedID)
	if err != nil {
		return err
	}
	start := time.Now()
	layer, done, err := m.newLayer(child.ID)
	if err != nil {
		return err
	}
	defer done()
	conn, err := superuserConn(ctx, sd, lease.Dial)
	if err != nil {
		return fmt.Errorf("connect to parent %q: %w", parent, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// The upper layer alone, or the merged data directory when the chain flattens.
	src, layers := m.layoutOf(prec.ID).upper, append([]string{layer}, prec.Layers...)
	flat := m.mustFlatten(layers)
	if flat {
		src, layers = m.layoutOf(prec.ID).data, []string{layer}
	}
	if err := m.fault(failpoint.Fork, lease.b); err != nil {
		return err
	}
	if err := m.onlineCopy(ctx, conn, sd.PGVersion, "pgbranchproxy fork of "+parent, src, layer); err != nil {
		return fmt.Errorf("copy parent %q: %w", parent, err)
	}
	digWALHoles(ctx, layer)
	// The child starts with the parent's roles as of the fork.
	parentRoles, err := roles.Read(ctx, conn)
	if err != nil {
		return fmt.Errorf("read parent's roles: %w", err)
	}
	m.log.Info("forked parent layer", zap.String("branch", child.Name), zap.String("parent", parent),
		zap.String("how", "online"), zap.Bool("flattened", flat), zap.Duration("took", time.Since(start)))
	return m.adopt(ctx, b, prec, layers, parentRoles.Encode())
}

// removeServerFiles removes what a server leaves in its data directory that a copy
// must not carry.
func removeServerFiles(layer string) {
	for _, f := range []string{"postmaster.pid", "postmaster.opts", "backup_label.old"} {
		os.Remove(filepath.Join(layer, f))
	}
}

// digWALHoles turns the zeroed parts of the layer's WAL segments into holes: the
// segment pg_backup_stop switches to is written out in full, and the child needs
// none of its zeros on disk. Best effort: a filesystem without hole punching keeps
// them.
func digWALHoles(ctx context.Context, layer string) {
	segs, _ := filepath.Glob(filepath.Join(layer, "pg_wal", "0000*"))
	for _, seg := range segs {
		exec.CommandContext(ctx, "fallocate", "--dig-holes", seg).Run()
	}
}

// copyTree copies src into dst (created if needed) preserving owners, modes, xattrs
// (OverlayFS opaque and redirect markers) and whiteouts, cloning data where the
// filesystem can.
func copyTree(ctx context.Context, src, dst string) error {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", src+"/.", dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("copy branch layer: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// writeOwned replaces path (which may be a whiteout copied from the parent's
// layer) with a file owned by uid:gid.
func writeOwned(path, content string, uid, gid int) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return err
	}
	return os.Chown(path, uid, gid)
}

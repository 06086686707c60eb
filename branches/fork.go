package branches

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"go.uber.org/zap"
)

// A branch of a branch gets a read-only layer of its own: an online, backup-consistent
// copy of the parent's upper layer taken between pg_backup_start and pg_backup_stop,
// with the backup_label Postgres needs to recover from it. The parent keeps running
// and its sessions are not disturbed; the child reads the parent's state as of the
// fork through that layer and the parent's own lower layers, and copies nothing it
// only reads. Where copy-up clones (XFS reflink, btrfs) the copy is a clone too.

// layersDir holds fork layers, shared by every descendant that lists them; a layer
// is removed when no branch lists it any more.
func (m *Manager) layersDir() string { return filepath.Join(m.cfg.StateDir, "layers") }

// fork takes the snapshot of parent k for the child b and sets b's layers.
func (m *Manager) fork(ctx context.Context, b *branch, parent string) error {
	m.mu.Lock()
	child := b.rec
	m.mu.Unlock()
	// A lease keeps the parent running, and safe from reset, stop and destroy, for the
	// length of the copy; it wakes the parent if it was stopped.
	lease, err := m.Acquire(ctx, router.Route{Branch: parent, Options: router.Options{Source: child.Source}})
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
	layer := filepath.Join(m.layersDir(), "b"+strconv.FormatInt(child.ID, 10))
	if err := os.MkdirAll(m.layersDir(), 0o700); err != nil {
		return err
	}
	os.RemoveAll(layer)
	conn, err := superuserConn(ctx, sd, lease.Dial)
	if err != nil {
		return fmt.Errorf("connect to parent %q: %w", parent, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	major, _ := strconv.Atoi(sd.PGVersion)
	startSQL, stopSQL := "SELECT pg_backup_start($1, true)", "SELECT labelfile, spcmapfile FROM pg_backup_stop(false)"
	if major < 15 {
		startSQL, stopSQL = "SELECT pg_start_backup($1, true, false)", "SELECT labelfile, spcmapfile FROM pg_stop_backup(false, false)"
	}
	if _, err := conn.Exec(ctx, startSQL, "pgbranchproxy fork of "+parent); err != nil {
		return fmt.Errorf("start backup of parent: %w", err)
	}
	upper := m.layoutOf(prec.ID).upper
	if err := copyTree(ctx, upper, layer); err != nil {
		conn.Exec(context.WithoutCancel(ctx), stopSQL)
		return err
	}
	var label, spcmap string
	if err := conn.QueryRow(ctx, stopSQL).Scan(&label, &spcmap); err != nil {
		return fmt.Errorf("stop backup of parent: %w", err)
	}
	// WAL written while the files were copied must be complete in the layer: copy it
	// again now that the backup has ended.
	if _, err := os.Stat(filepath.Join(upper, "pg_wal")); err == nil {
		if err := copyTree(ctx, filepath.Join(upper, "pg_wal"), filepath.Join(layer, "pg_wal")); err != nil {
			return err
		}
	}
	for _, f := range []string{"postmaster.pid", "postmaster.opts", "backup_label.old"} {
		os.Remove(filepath.Join(layer, f))
	}
	if err := writeOwned(filepath.Join(layer, "backup_label"), label, m.cfg.User.UID, m.cfg.User.GID); err != nil {
		return err
	}
	if strings.TrimSpace(spcmap) != "" {
		if err := writeOwned(filepath.Join(layer, "tablespace_map"), spcmap, m.cfg.User.UID, m.cfg.User.GID); err != nil {
			return err
		}
	}
	m.mu.Lock()
	b.rec.Layers = append([]string{layer}, prec.Layers...)
	b.rec.SeedID = prec.SeedID
	b.rec.Parent = parent
	m.mu.Unlock()
	m.log.Info("forked parent layer", zap.String("branch", child.Name), zap.String("parent", parent),
		zap.Duration("took", time.Since(start)))
	// The child starts with the parent's roles as of the fork.
	parentRoles, err := roles.Read(ctx, conn)
	if err != nil {
		return fmt.Errorf("read parent's roles: %w", err)
	}
	return m.save(ctx, b, "fork layer ready", func(r *catalog.Branch) {
		r.Layers, r.SeedID, r.Parent, r.Roles = b.rec.Layers, prec.SeedID, parent, parentRoles.Encode()
	})
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

// collectLayers removes fork layers no branch lists any more.
func (m *Manager) collectLayers(ctx context.Context) {
	entries, err := os.ReadDir(m.layersDir())
	if err != nil {
		return
	}
	all, err := m.cat.Branches(ctx)
	if err != nil {
		return
	}
	used := map[string]bool{}
	for _, b := range all {
		for _, l := range b.Layers {
			used[l] = true
		}
	}
	for _, e := range entries {
		p := filepath.Join(m.layersDir(), e.Name())
		if !used[p] {
			if err := os.RemoveAll(p); err != nil {
				m.log.Warn("remove unused layer", zap.String("layer", e.Name()), zap.Error(err))
			}
		}
	}
}

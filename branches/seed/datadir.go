package seed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
)

// copyDataDir copies the stopped cluster req.DataDir into req.Dir, its
// tablespaces included, owned by u.
func copyDataDir(ctx context.Context, req Request, u runtime.OSUser, progress func(string)) error {
	if _, err := os.Stat(filepath.Join(req.DataDir, "postmaster.pid")); err == nil {
		return fmt.Errorf("%s has a postmaster.pid: stop that server first (or use --from-url)", req.DataDir)
	}
	if _, err := runtime.DataDirVersion(req.DataDir); err != nil {
		return err
	}
	progress("copying " + req.DataDir)
	if err := copyTree(ctx, req.DataDir, req.Dir); err != nil {
		return fmt.Errorf("copy data directory: %w", err)
	}
	if err := inlineTablespaces(ctx, req.Dir, progress); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "chown", "-R", fmt.Sprintf("%d:%d", u.UID, u.GID), req.Dir).CombinedOutput(); err != nil {
		return fmt.Errorf("chown data directory: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return os.Chmod(req.Dir, 0o700)
}

// inlineTablespaces replaces each tablespace link of the copy dir
// (pg_tblspc/OID, a symbolic link to the cluster's directory for it) with a copy
// of that directory, as an in-place tablespace. Left a link, it would have the
// seed's server, and every branch's, write into the cluster's own files outside
// the overlay, all of them into the same ones.
func inlineTablespaces(ctx context.Context, dir string, progress func(string)) error {
	spc := filepath.Join(dir, "pg_tblspc")
	entries, err := os.ReadDir(spc)
	if err != nil {
		return err
	}
	for _, e := range entries {
		link := filepath.Join(spc, e.Name())
		if e.Type()&os.ModeSymlink == 0 {
			continue // an in-place tablespace, copied with the directory
		}
		target, err := filepath.EvalSymlinks(link)
		if err != nil {
			return fmt.Errorf("tablespace %s: %w", e.Name(), err)
		}
		progress(fmt.Sprintf("copying tablespace %s from %s", e.Name(), target))
		if err := os.Remove(link); err != nil {
			return err
		}
		if err := os.Mkdir(link, 0o700); err != nil {
			return err
		}
		if err := copyTree(ctx, target, link); err != nil {
			return fmt.Errorf("copy tablespace %s: %w", e.Name(), err)
		}
	}
	return nil
}

// copyTree copies the contents of src into the directory dst, cloning extents
// where the filesystem can.
func copyTree(ctx context.Context, src, dst string) error {
	if out, err := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", src+"/.", dst).CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// InPlaceSettings is what a server on dataDir needs when the directory holds
// in-place tablespaces (a --from-datadir cluster's, copied in): recovery from a
// backup label (a branch of a running branch, a --from-branch copy) refuses their
// directories in pg_tblspc unless they are allowed.
func InPlaceSettings(dataDir string) map[string]string {
	entries, _ := os.ReadDir(filepath.Join(dataDir, "pg_tblspc"))
	for _, e := range entries {
		if e.IsDir() {
			return map[string]string{"allow_in_place_tablespaces": "on"}
		}
	}
	return nil
}

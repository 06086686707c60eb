package seed

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
)

// KindDump is a source restored from a pg_dump archive (custom, directory or tar).
const KindDump = "dump"

// Archive formats pg_restore reads.
const (
	FormatCustom    = "custom"
	FormatDirectory = "directory"
	FormatTar       = "tar"
)

// DumpFormat tells which pg_dump archive format path holds: a directory with a
// toc.dat, a file that starts with PGDMP, or a tar file. A plain SQL dump is an
// error that names --from-sql.
func DumpFormat(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		if _, err := os.Stat(filepath.Join(path, "toc.dat")); err != nil {
			return "", fmt.Errorf("%s is a directory without toc.dat: not a pg_dump directory archive", path)
		}
		return FormatDirectory, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, 512)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, []byte("PGDMP")):
		return FormatCustom, nil
	case len(head) >= 262 && string(head[257:262]) == "ustar":
		return FormatTar, nil
	}
	return "", fmt.Errorf("%s is not a pg_dump archive (custom, directory or tar); a plain SQL dump goes with --from-sql", path)
}

// loadDump creates req.Database and restores the archive into it with pg_restore,
// in parallel where the format allows, streaming pg_restore's verbose lines to
// progress. Without KeepOwners it restores as pg_restore --no-owner --no-privileges
// does: every object belongs to the superuser. With KeepOwners, the owners the
// archive names are created (NOLOGIN) when missing, and ownership and privileges
// are restored.
func (b *Builder) loadDump(ctx context.Context, srv *server, version, superuser string, req Request, progress func(string)) error {
	format, err := DumpFormat(req.DumpPath)
	if err != nil {
		return err
	}
	req.Version = version
	archive, err := b.readableArchive(ctx, req, progress)
	if err != nil {
		return err
	}
	script, err := b.archiveSchema(ctx, req, archive)
	if err != nil {
		return err
	}
	var owner string
	args := []string{"-h", srv.sockDir, "-U", superuser, "-d", req.Database, "--verbose", "--exit-on-error", "--no-password"}
	if req.KeepOwners {
		owners, dbOwner, err := scriptRoles(script)
		if err != nil {
			return fmt.Errorf("read the archive's roles: %w", err)
		}
		if err := srv.ensureRoles(ctx, superuser, owners); err != nil {
			return err
		}
		if dbOwner != "" {
			owner = " OWNER " + quoteIdent(dbOwner) // the archive's database, as it was owned
		}
	} else {
		args = append(args, "--no-owner", "--no-privileges")
	}
	if err := srv.createDatabase(ctx, superuser, req.Database, owner, script, progress); err != nil {
		return err
	}
	jobs := req.Jobs
	if jobs < 1 {
		jobs = goruntime.NumCPU()
	}
	if format == FormatTar {
		jobs = 1 // pg_restore reads a tar archive sequentially
	}
	if jobs > 1 {
		args = append(args, "-j", strconv.Itoa(jobs))
	}
	unit := "jobs"
	if jobs == 1 {
		unit = "job"
	}
	progress(fmt.Sprintf("restoring %s archive %s into %s (%d %s)", format, filepath.Base(req.DumpPath), req.Database, jobs, unit))
	return b.run(ctx, req, runtime.Job{Prog: "pg_restore", Paths: []string{srv.sockDir, archive}}, progress, append(args, archive)...)
}

// readableArchive returns a path of the archive that the runtime's OS user can read:
// the archive itself when it can, else a copy in the build area (cp --reflink=auto).
func (b *Builder) readableArchive(ctx context.Context, req Request, progress func(string)) (string, error) {
	u := b.rt.User()
	if readableBy(req.DumpPath, u.UID, u.GID) {
		return req.DumpPath, nil
	}
	dst := filepath.Join(filepath.Dir(req.Dir), "archive")
	progress("copying " + filepath.Base(req.DumpPath) + " where the Postgres user can read it")
	if out, err := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", req.DumpPath, dst).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copy archive: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if out, err := exec.CommandContext(ctx, "chown", "-R", fmt.Sprintf("%d:%d", u.UID, u.GID), dst).CombinedOutput(); err != nil {
		return "", fmt.Errorf("chown archive: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return dst, nil
}

// readableBy tells, from mode bits, whether uid/gid can reach and read path (and,
// for a directory, every file in it).
func readableBy(path string, uid, gid int) bool {
	can := func(p string, want os.FileMode) bool {
		st, err := os.Stat(p)
		if err != nil {
			return false
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return false
		}
		m := st.Mode().Perm()
		switch {
		case int(sys.Uid) == uid:
			return m&(want<<6) == want<<6
		case int(sys.Gid) == gid:
			return m&(want<<3) == want<<3
		}
		return m&want == want
	}
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if !can(d, 1) {
			return false
		}
		if d == "/" || d == "." {
			break
		}
	}
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return err == nil && can(path, 4)
	}
	if !can(path, 5) {
		return false
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if !can(filepath.Join(path, e.Name()), 4) {
			return false
		}
	}
	return true
}

// archiveSchema is the archive's schema as pg_restore -s -C writes it: -C adds
// the database's own statements (its CREATE DATABASE, owner and settings).
func (b *Builder) archiveSchema(ctx context.Context, req Request, archive string) ([]byte, error) {
	var out, stderr bytes.Buffer
	err := b.rt.Run(ctx, runtime.Job{Version: req.Version, Image: req.Image, Prog: "pg_restore",
		Args: []string{"-s", "-C", "-f", "-", archive}, Stdout: &out, Stderr: &stderr, Paths: []string{archive}})
	if err != nil {
		return nil, fmt.Errorf("pg_restore -s: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out.Bytes(), nil
}

// createDatabase creates the database the archive is restored into, with the
// encoding and locale the archive's database had (ICU or libc collation, ctype),
// so that text sorts and compares in branches as it did where it was dumped. An
// ICU database whose libc locale this host lacks keeps its ICU collation, with
// C.UTF-8 for the libc locale. When this server cannot create it so (a libc
// collation this host lacks), it says so in progress and creates it with the
// cluster's defaults.
func (s *server) createDatabase(ctx context.Context, superuser, name, owner string, script []byte, progress func(string)) error {
	create := "CREATE DATABASE " + quoteIdent(name)
	locales, err := databaseLocales(script)
	if err != nil {
		return fmt.Errorf("read the archive's database: %w", err)
	}
	for i, locale := range locales {
		err := s.exec(ctx, superuser, "postgres", create+" WITH "+locale+owner)
		if err == nil {
			if i > 0 {
				progress(fmt.Sprintf("warning: the archive's database cannot be created here as it was (%s); "+
					"its libc locale is C.UTF-8 instead, its collation is as it was (install the locale, then source refresh)", locales[0]))
			}
			return nil
		}
		if i == len(locales)-1 {
			progress(fmt.Sprintf("warning: the archive's database cannot be created here as it was (%s: %v); "+
				"restoring into one with the cluster's encoding and locale, C.UTF-8, so text may sort differently "+
				"(install the locale, then source refresh)", locales[0], err))
		}
	}
	if err := s.exec(ctx, superuser, "postgres", create+owner); err != nil {
		return fmt.Errorf("create database %q: %w", name, err)
	}
	return nil
}

// ensureRoles creates each named role that does not exist, as NOLOGIN.
func (s *server) ensureRoles(ctx context.Context, superuser string, names []string) error {
	for _, n := range names {
		sql := fmt.Sprintf(`DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = %s) THEN CREATE ROLE %s NOLOGIN; END IF; END$$`,
			quoteLiteral(n), quoteIdent(n))
		if err := s.exec(ctx, superuser, "postgres", sql); err != nil {
			return fmt.Errorf("create owner role %q: %w", n, err)
		}
	}
	return nil
}

func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

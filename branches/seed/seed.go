package seed

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pgbranchproxy/pgbranchproxy/branches/dbdiff"
	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"go.uber.org/zap"
)

// Kinds of source.
const (
	KindSQL     = "sql"
	KindURL     = "url"
	KindDataDir = "datadir"
	KindEmpty   = "empty"
)

// Superuser is the bootstrap superuser name initdb is given for seeds this package
// creates.
const Superuser = "postgres"

// Request describes one seed to build.
type Request struct {
	Kind     string
	SQLFile  string // KindSQL: the file to run
	Database string // KindSQL: the database to create and run it in
	URL      string // KindURL: a replication-capable connection string
	DataDir  string // KindDataDir: a stopped cluster to copy
	Version  string // major version for KindSQL and KindEmpty; "" for the default binaries
	// Image is the container image every step runs in, under a container runtime;
	// "" for the runtime's default. The process runtime ignores it.
	Image    string
	DumpPath string // KindDump: a pg_dump archive (custom file, directory or tar)
	// KeepOwners (KindDump) restores owners and privileges instead of --no-owner.
	KeepOwners bool
	Jobs       int    // KindDump: pg_restore -j where the format allows
	Mask       string // SQL run in Database after loading and before settling; see mask

	// Dir is the data directory to create. Its parent must be traversable by the
	// runtime's OS user; Dir must not exist yet.
	Dir string
	// Progress, if set, receives one human-readable line per step.
	Progress func(string)
}

// Result is what a built seed holds.
type Result struct {
	PGVersion string
	Databases []string // databases that accept connections
	Superuser string
	Roles     roles.Set // login roles, for authentication at the proxy
	Snapshot  dbdiff.Snapshot
}

// Runtime is what a Builder needs of a runtime: a server to settle a seed on, and
// Postgres programs (initdb, pg_basebackup, psql, pg_controldata) run to completion,
// both in the seed's image under a container runtime.
type Runtime interface {
	runtime.Runtime
	runtime.Runner
}

// Builder builds seeds with a Runtime. Safe for concurrent use on distinct Dirs.
type Builder struct {
	rt  Runtime
	log *zap.Logger
}

// NewBuilder returns a Builder.
func NewBuilder(rt Runtime, log *zap.Logger) *Builder {
	return &Builder{rt: rt, log: log}
}

// Build creates req.Dir from the source and settles it. On error the caller removes Dir.
func (b *Builder) Build(ctx context.Context, req Request) (Result, error) {
	progress := req.Progress
	if progress == nil {
		progress = func(string) {}
	}
	u := b.rt.User()
	work := filepath.Dir(req.Dir)
	if err := os.Mkdir(req.Dir, 0o700); err != nil {
		return Result{}, err
	}
	if err := os.Chown(req.Dir, u.UID, u.GID); err != nil {
		return Result{}, err
	}
	superuser := Superuser
	switch req.Kind {
	case KindEmpty, KindSQL, KindDump:
		progress("initdb")
		if err := b.run(ctx, req, runtime.Job{Prog: "initdb", Paths: []string{req.Dir}}, progress,
			"-D", req.Dir, "-U", Superuser, "-E", "UTF8", "--locale=C.UTF-8", "-A", "trust", "--no-instructions"); err != nil {
			return Result{}, err
		}
	case KindURL:
		progress("pg_basebackup from the source server")
		if err := b.run(ctx, req, runtime.Job{Prog: "pg_basebackup", Paths: []string{req.Dir}, Network: true}, progress,
			"-d", req.URL, "-D", req.Dir, "-X", "stream", "-c", "fast", "--no-sync", "-P"); err != nil {
			return Result{}, err
		}
		if su := urlUser(req.URL); su != "" {
			superuser = su
		}
	case KindDataDir:
		if err := copyDataDir(ctx, req, u, progress); err != nil {
			return Result{}, err
		}
	default:
		return Result{}, fmt.Errorf("unknown source kind %q", req.Kind)
	}
	version, err := runtime.DataDirVersion(req.Dir)
	if err != nil {
		return Result{}, err
	}
	if err := removeSlots(req.Dir, progress); err != nil {
		return Result{}, err
	}
	control, err := b.controlData(ctx, req.Dir, version, req.Image)
	if err != nil {
		return Result{}, err
	}
	srv, err := startServer(ctx, b.rt, work, req.Dir, version, req.Image, preparedSettings(control))
	if err != nil {
		return Result{}, err
	}
	defer srv.stop()
	if su, err := srv.findSuperuser(ctx, superuser); err != nil {
		return Result{}, err
	} else {
		superuser = su
	}
	if err := srv.rollbackPrepared(ctx, superuser, progress); err != nil {
		return Result{}, err
	}
	if req.Kind == KindSQL {
		if err := b.loadSQL(ctx, srv, version, superuser, req, progress); err != nil {
			return Result{}, err
		}
	}
	if req.Kind == KindDump {
		if err := b.loadDump(ctx, srv, version, superuser, req, progress); err != nil {
			return Result{}, err
		}
	}
	if req.Mask != "" {
		if err := b.mask(ctx, srv, version, superuser, req, progress); err != nil {
			return Result{}, err
		}
	}
	dbs, err := srv.settle(ctx, superuser, progress)
	if err != nil {
		return Result{}, err
	}
	// Once settled: VACUUM makes the free space and visibility maps every branch
	// starts with, and branch diff --data compares a branch's sizes with these.
	snap, err := b.snapshot(ctx, srv, req, version, superuser, progress)
	if err != nil {
		return Result{}, fmt.Errorf("record schema: %w", err)
	}
	rs, err := srv.roles(ctx, superuser)
	if err != nil {
		return Result{}, fmt.Errorf("read roles: %w", err)
	}
	logDir := srv.logDirectory(ctx, superuser)
	progress("clean shutdown")
	if err := srv.stop(); err != nil {
		return Result{}, err
	}
	progress("trimming WAL")
	if err := b.trimWAL(ctx, req.Dir, version, req.Image); err != nil {
		return Result{}, err
	}
	cleanRuntimeFiles(req.Dir)
	removeOriginFiles(req.Dir, logDir)
	return Result{PGVersion: version, Databases: dbs, Superuser: superuser, Roles: rs, Snapshot: snap}, nil
}

// run runs job (a Postgres program of req's version, in req's image) as the OS user
// with args, sending its output lines to progress and returning the last of them in
// the error.
func (b *Builder) run(ctx context.Context, req Request, job runtime.Job, progress func(string), args ...string) error {
	job.Version, job.Image, job.Args = req.Version, req.Image, args
	pr, pw := io.Pipe()
	job.Stdout, job.Stderr = pw, pw
	var last []string
	var firstErr string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Split(scanLinesOrCR)
		for sc.Scan() {
			line := redactPasswords(strings.TrimSpace(sc.Text()))
			if line == "" {
				continue
			}
			if strings.HasPrefix(line, job.Prog+":") {
				progress(line) // pg_restore and pg_basebackup name themselves
			} else {
				progress(job.Prog + ": " + line)
			}
			if firstErr == "" && strings.Contains(line, "error:") {
				firstErr = line // the cause, which later lines ("a worker died") may push out
			}
			last = append(last, line)
			if len(last) > 5 {
				last = last[1:]
			}
		}
		io.Copy(io.Discard, pr)
	}()
	err := b.rt.Run(ctx, job)
	pw.Close()
	<-done
	if err != nil {
		if firstErr != "" && !slices.Contains(last, firstErr) {
			last = append([]string{firstErr, "..."}, last...)
		}
		return fmt.Errorf("%w: %s", err, strings.Join(last, "; "))
	}
	return nil
}

// scanLinesOrCR splits on \n or \r, so progress meters that redraw a line are seen.
func scanLinesOrCR(data []byte, atEOF bool) (int, []byte, error) {
	for i, c := range data {
		if c == '\n' || c == '\r' {
			return i + 1, data[:i], nil
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

func (b *Builder) loadSQL(ctx context.Context, srv *server, version, superuser string, req Request, progress func(string)) error {
	f, err := os.Open(req.SQLFile)
	if err != nil {
		return fmt.Errorf("open SQL file: %w", err)
	}
	defer f.Close()
	if err := srv.exec(ctx, superuser, "postgres", "CREATE DATABASE "+quoteIdent(req.Database)); err != nil {
		return fmt.Errorf("create database %q: %w", req.Database, err)
	}
	progress("loading " + filepath.Base(req.SQLFile) + " into " + req.Database)
	req.Version = version
	// The file goes in on standard input; its errors name it (crm.sql:28: ERROR:
	// ...), and its queries' results (a plain pg_dump's set_config) stay out of them.
	err = b.run(ctx, req, runtime.Job{Prog: "psql", Stdin: f, Paths: []string{srv.sockDir}}, func(string) {},
		"-X", "-q", "-o", "/dev/null", "-v", "ON_ERROR_STOP=1", "-h", srv.sockDir, "-U", superuser, "-d", req.Database, "-f", "-")
	if err != nil {
		return fileError(err, "", filepath.Base(req.SQLFile)+":")
	}
	return nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

var errNotShutDown = errors.New("cluster was not shut down cleanly")

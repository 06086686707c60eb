package seed_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"github.com/pgbranchproxy/pgbranchproxy/branches/seed"
	"go.uber.org/zap"
)

// newBuilder returns a Builder running PostgreSQL as the postgres user, and a
// temporary directory that user can traverse, to build seeds in.
func newBuilder(t *testing.T) (*seed.Builder, *runtime.Process, string) {
	t.Helper()
	u, err := runtime.LookupUser("postgres")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	rt := runtime.NewProcess(runtime.Binaries{}, u, zap.NewNop())
	return seed.NewBuilder(rt, zap.NewNop()), rt, dir
}

var walSegment = regexp.MustCompile(`^[0-9A-F]{24}$`)

// progressLog collects Progress lines; Build may call Progress from its goroutines.
type progressLog struct {
	mu    sync.Mutex
	lines []string
}

func (p *progressLog) add(s string) { p.mu.Lock(); p.lines = append(p.lines, s); p.mu.Unlock() }

func (p *progressLog) has(prefix string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.ContainsFunc(p.lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
}

func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds seeds with PostgreSQL: skipped with -short")
	}
	t.Parallel()
	tests := []struct {
		name    string
		kind    string
		sql     string // KindSQL: the file's content
		wantDBs []string
	}{
		{"empty", seed.KindEmpty, "", []string{"postgres", "template1"}},
		{"datadir", seed.KindDataDir, "", []string{"postgres", "template1"}},
		{"sql", seed.KindSQL, "CREATE TABLE t (id int PRIMARY KEY, v text);\n" +
			"INSERT INTO t SELECT g, repeat('x', 100) FROM generate_series(1, 5000) g;\n" +
			"CREATE ROLE app LOGIN PASSWORD 'secret';\n", []string{"app db", "postgres", "template1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			b, rt, dir := newBuilder(t)
			req := seed.Request{Kind: tc.kind, Version: "15", Dir: filepath.Join(dir, "data")}
			if tc.kind == seed.KindSQL {
				req.SQLFile = filepath.Join(dir, "load.sql")
				req.Database = "app db"
				if err := os.WriteFile(req.SQLFile, []byte(tc.sql), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.kind == seed.KindDataDir {
				req.DataDir = initdb(t, ctx, rt, filepath.Join(dir, "src"))
			}
			var progress progressLog
			req.Progress = progress.add
			res, err := b.Build(ctx, req)
			if err != nil {
				t.Fatalf("Build: %v\nprogress: %q", err, progress.lines)
			}
			if res.PGVersion != "15" || res.Superuser != seed.Superuser || !slices.Equal(res.Databases, tc.wantDBs) {
				t.Errorf("Build = version %q superuser %q databases %q, want 15 postgres %q",
					res.PGVersion, res.Superuser, res.Databases, tc.wantDBs)
			}
			if _, ok := res.Roles[seed.Superuser]; !ok {
				t.Errorf("roles %v lack the superuser", res.Roles)
			}
			if tc.kind == seed.KindSQL && !res.Roles["app"].CanAuthenticate(time.Now()) {
				t.Errorf("role app from the SQL file = %+v, want one that can authenticate", res.Roles["app"])
			}
			first := "initdb"
			if tc.kind == seed.KindDataDir {
				first = "copying " + req.DataDir
			}
			for _, step := range []string{first, "VACUUM (FREEZE, ANALYZE) in postgres", "clean shutdown", "trimming WAL"} {
				if !progress.has(step) {
					t.Errorf("no progress line %q in %q", step, progress.lines)
				}
			}

			// Settled: shut down cleanly, one WAL segment left, its zero tail a hole.
			st, err := os.Stat(req.Dir)
			if err != nil {
				t.Fatal(err)
			}
			if sys := st.Sys().(*syscall.Stat_t); int(sys.Uid) != rt.User().UID || st.Mode().Perm() != 0o700 {
				t.Errorf("seed dir uid %d mode %v, want %d 0700", sys.Uid, st.Mode().Perm(), rt.User().UID)
			}
			cmd, err := rt.Command(ctx, "15", "pg_controldata", "-D", req.Dir)
			if err != nil {
				t.Fatal(err)
			}
			cmd.Env = append(cmd.Env, "LC_ALL=C")
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(`(?m)^Database cluster state:\s+shut down$`).Match(out) {
				t.Errorf("pg_controldata:\n%s\nwant state shut down", out)
			}
			entries, err := os.ReadDir(filepath.Join(req.Dir, "pg_wal"))
			if err != nil {
				t.Fatal(err)
			}
			var segs []string
			for _, e := range entries {
				if walSegment.MatchString(e.Name()) {
					segs = append(segs, e.Name())
				}
			}
			if len(segs) != 1 {
				t.Fatalf("pg_wal holds segments %q, want exactly one", segs)
			}
			if !strings.Contains(string(out), "REDO WAL file:    "+segs[0]) {
				t.Errorf("kept segment %s is not the REDO WAL file:\n%s", segs[0], out)
			}
			seg := filepath.Join(req.Dir, "pg_wal", segs[0])
			fi, err := os.Stat(seg)
			if err != nil {
				t.Fatal(err)
			}
			if alloc := fi.Sys().(*syscall.Stat_t).Blocks * 512; fi.Size() != 16<<20 || alloc > 1<<20 {
				t.Errorf("WAL segment size %d allocated %d, want 16 MiB with at most 1 MiB allocated", fi.Size(), alloc)
			}
			if es, _ := os.ReadDir(filepath.Join(req.Dir, "pg_wal", "archive_status")); len(es) != 0 {
				t.Errorf("archive_status not emptied: %v", es)
			}
			for _, f := range []string{"postmaster.pid", "postmaster.opts"} {
				if _, err := os.Stat(filepath.Join(req.Dir, f)); !os.IsNotExist(err) {
					t.Errorf("%s left in the seed: %v", f, err)
				}
			}
			if strays, _ := runtime.FindPostmasters(dir); len(strays) != 0 {
				t.Errorf("postmasters left running: %+v", strays)
			}
		})
	}
}

// initdb makes a stopped cluster owned by root at dir, as a user's own cluster
// would be owned by someone other than the runtime's user.
func initdb(t *testing.T, ctx context.Context, rt *runtime.Process, dir string) string {
	t.Helper()
	tmp := dir + ".tmp"
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, rt.User().UID, rt.User().GID); err != nil {
		t.Fatal(err)
	}
	cmd, err := rt.Command(ctx, "15", "initdb", "-D", tmp, "-U", "postgres", "-A", "trust", "--no-instructions", "--no-sync")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	if out, err := exec.Command("cp", "-a", "--no-preserve=ownership", tmp, dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	return dir
}

func TestBuildRefuses(t *testing.T) {
	if testing.Short() {
		t.Skip("Build makes directories owned by the postgres OS user (root): skipped with -short")
	}
	t.Parallel()
	tests := []struct {
		name    string
		req     func(dir string) seed.Request
		wantErr string
	}{
		{"unknown kind", func(dir string) seed.Request {
			return seed.Request{Kind: "tarball", Dir: filepath.Join(dir, "data")}
		}, `unknown source kind "tarball"`},
		{"dir exists", func(dir string) seed.Request {
			return seed.Request{Kind: seed.KindEmpty, Dir: dir}
		}, "exists"},
		{"datadir still running", func(dir string) seed.Request {
			src := filepath.Join(dir, "src")
			os.Mkdir(src, 0o700)
			os.WriteFile(filepath.Join(src, "PG_VERSION"), []byte("15\n"), 0o600)
			os.WriteFile(filepath.Join(src, "postmaster.pid"), []byte("1\n"), 0o600)
			return seed.Request{Kind: seed.KindDataDir, DataDir: src, Dir: filepath.Join(dir, "data")}
		}, "has a postmaster.pid"},
		{"datadir not a cluster", func(dir string) seed.Request {
			src := filepath.Join(dir, "src")
			os.Mkdir(src, 0o700)
			return seed.Request{Kind: seed.KindDataDir, DataDir: src, Dir: filepath.Join(dir, "data")}
		}, "not a PostgreSQL data directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, _, dir := newBuilder(t)
			_, err := b.Build(context.Background(), tc.req(dir))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Build = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"go.uber.org/zap"
)

// newProcess returns a Process running PostgreSQL 15 as the postgres user, and a
// temporary directory that user can traverse.
func newProcess(t *testing.T) (*runtime.Process, string) {
	t.Helper()
	u, err := runtime.LookupUser("postgres")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// t.TempDir's directories are 0700 root: let the postgres user through.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return runtime.NewProcess(runtime.Binaries{}, u, zap.NewNop()), dir
}

// userDir makes a directory owned by the runtime's user with mode 0700.
func userDir(t *testing.T, p *runtime.Process, path string) string {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, p.User().UID, p.User().GID); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestProcessStartStop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL: skipped with -short")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, dir := newProcess(t)
	data := userDir(t, p, filepath.Join(dir, "data"))
	sock := userDir(t, p, filepath.Join(dir, "run"))

	cmd, err := p.Command(ctx, "15", "initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-instructions", "--no-sync")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	if v, err := runtime.DataDirVersion(data); err != nil || v != "15" {
		t.Fatalf("DataDirVersion after initdb = %q, %v", v, err)
	}

	logFile := filepath.Join(dir, "server.log")
	inst, err := p.Start(ctx, runtime.Spec{
		Name:      "runtime-test",
		Version:   "15",
		DataDir:   data,
		SocketDir: sock,
		LogFile:   logFile,
		Settings:  map[string]string{"fsync": "off", "shared_buffers": "16MB"},
		Env:       []string{"PGTZ=UTC"},
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			inst.Stop(context.Background())
		}
	})
	if inst.SocketPath() != filepath.Join(sock, ".s.PGSQL.5432") {
		t.Errorf("SocketPath = %s", inst.SocketPath())
	}
	if !runtime.Alive(inst.PID()) {
		t.Errorf("postmaster %d is not alive after Start", inst.PID())
	}

	// Start returns only once the server accepts connections, with our settings.
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Database = sock, 5432, "postgres", "postgres"
	cfg.Fallbacks = nil
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect right after Start: %v", err)
	}
	var name, listen string
	if err := conn.QueryRow(ctx, "SELECT current_setting('cluster_name'), current_setting('listen_addresses')").Scan(&name, &listen); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if name != "runtime-test" || listen != "" {
		t.Errorf("cluster_name %q listen_addresses %q, want runtime-test and none", name, listen)
	}

	strays, err := runtime.FindPostmasters(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(strays) != 1 || strays[0] != (runtime.Stray{PID: inst.PID(), DataDir: data}) {
		t.Errorf("FindPostmasters = %+v, want the one postmaster %d on %s", strays, inst.PID(), data)
	}

	if err := inst.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
	stopped = true
	select {
	case <-inst.Done():
	default:
		t.Error("Done is not closed after Stop")
	}
	if runtime.Alive(inst.PID()) {
		t.Errorf("postmaster %d alive after Stop", inst.PID())
	}
	if err := inst.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); !os.IsNotExist(err) {
		t.Errorf("postmaster.pid left after a clean stop: %v", err)
	}
	if tail := runtime.LogTail(logFile, 1); !strings.Contains(tail, "database system is shut down") {
		t.Errorf("log tail = %q, want the shutdown message", tail)
	}
}

func TestProcessStartFails(t *testing.T) {
	if testing.Short() {
		t.Skip("runs postgres: skipped with -short")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, dir := newProcess(t)
	// Not a data directory: postgres exits at once.
	data := userDir(t, p, filepath.Join(dir, "data"))
	sock := userDir(t, p, filepath.Join(dir, "run"))
	inst, err := p.Start(ctx, runtime.Spec{Version: "15", DataDir: data, SocketDir: sock, LogFile: filepath.Join(dir, "server.log")})
	if err == nil {
		inst.Stop(context.Background())
		t.Fatal("Start on an empty directory succeeded")
	}
	if !errors.Is(err, runtime.ErrExited) {
		t.Errorf("Start = %v, want ErrExited", err)
	}
	// The error carries the server's own explanation, from its log.
	if !strings.Contains(err.Error(), "could not access the server configuration file") {
		t.Errorf("Start error %q does not carry the log tail", err)
	}

	if _, err := p.Start(ctx, runtime.Spec{Version: "99", DataDir: data, SocketDir: sock, LogFile: filepath.Join(dir, "x.log")}); err == nil ||
		!strings.Contains(err.Error(), "--pg-bin") {
		t.Errorf("Start of a missing version = %v, want an error naming --pg-bin", err)
	}
}

// A version's binaries are looked up once per runtime: later commands do not look
// again (a lookup can run pg_config, a shell script, at every server start).
func TestCommandFindsBinariesOnce(t *testing.T) {
	dir := t.TempDir()
	for _, prog := range []string{"postgres", "initdb"} {
		if err := os.WriteFile(filepath.Join(dir, prog), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := runtime.NewProcess(runtime.Binaries{Dir: dir}, runtime.OSUser{}, zap.NewNop())
	first, err := p.Command(context.Background(), "15", "postgres")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "initdb")); err != nil {
		t.Fatal(err)
	}
	again, err := p.Command(context.Background(), "15", "postgres")
	if err != nil {
		t.Fatalf("second command looked the binaries up again: %v", err)
	}
	if again.Path != first.Path {
		t.Errorf("second command runs %s, first ran %s", again.Path, first.Path)
	}
	if _, err := p.Command(context.Background(), "16", "postgres"); err == nil {
		t.Error("another version was not looked up: the directory no longer has initdb")
	}
}

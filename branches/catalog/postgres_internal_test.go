package catalog

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"go.uber.org/zap"
)

// testServer is the Postgres 15 server the package's tests run the Postgres
// backend against: started by the first test that asks for it, as OS user
// postgres on a unix socket in a temporary directory, and stopped by TestMain.
// Each test gets a database of its own.
var testServer struct {
	once sync.Once
	dir  string
	inst runtime.Instance
	err  error
	n    atomic.Int64
}

func TestMain(m *testing.M) {
	code := m.Run()
	stopTestServer()
	os.Exit(code)
}

// testPostgresDSN returns the URL of a new, empty database on the test server.
// Under -short it skips the test; without root (to run the server as postgres)
// it fails it.
func testPostgresDSN(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts PostgreSQL: skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root to run PostgreSQL as OS user postgres; run as root or with -short")
	}
	testServer.once.Do(func() { testServer.err = startTestServer() })
	if testServer.err != nil {
		t.Fatalf("test server: %v", testServer.err)
	}
	name := fmt.Sprintf("catalog_%d", testServer.n.Add(1))
	admin, err := sql.Open("pgx", testServerURL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	return testServerURL(name)
}

func testServerURL(db string) string {
	return "postgres:///" + db + "?host=" + filepath.Join(testServer.dir, "run") + "&user=postgres"
}

func startTestServer() error {
	u, err := runtime.LookupUser("postgres")
	if err != nil {
		return err
	}
	if testServer.dir, err = os.MkdirTemp("", "catalog-pg-"); err != nil {
		return err
	}
	if err := os.Chmod(testServer.dir, 0o711); err != nil {
		return err
	}
	data, run := filepath.Join(testServer.dir, "data"), filepath.Join(testServer.dir, "run")
	for _, d := range []string{data, run} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
		if err := os.Chown(d, u.UID, u.GID); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := runtime.NewProcess(runtime.Binaries{}, u, zap.NewNop())
	var out bytes.Buffer
	if err := p.Run(ctx, runtime.Job{Version: "15", Prog: "initdb", Stdout: &out, Paths: []string{data},
		Args: []string{"-D", data, "-U", "postgres", "-A", "trust", "--no-sync"}}); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out.String())
	}
	testServer.inst, err = p.Start(ctx, runtime.Spec{Name: "catalog-test", Version: "15", DataDir: data, SocketDir: run,
		LogFile:  filepath.Join(testServer.dir, "server.log"),
		Settings: map[string]string{"fsync": "off", "shared_buffers": "16MB", "max_connections": "200"}})
	return err
}

func stopTestServer() {
	if testServer.inst != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := testServer.inst.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "stop test server:", err)
		}
	}
	if testServer.dir != "" {
		os.RemoveAll(testServer.dir)
	}
}

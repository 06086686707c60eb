package catalog

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog/catalogtest"
)

// testServer is the Postgres 15 server the package's tests run the Postgres
// backend against: started by the first test that asks for it and stopped by
// TestMain. Each test gets a database of its own.
var testServer struct {
	once sync.Once
	srv  *catalogtest.Server
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testServer.srv != nil {
		if err := testServer.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop the test server:", err)
		}
	}
	os.Exit(code)
}

// testPostgresDSN returns the URL of a new, empty database on the test server.
// Under -short it skips the test; without root (to run the server as postgres)
// it fails it.
func testPostgresDSN(t testing.TB) string {
	t.Helper()
	needPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	testServer.once.Do(func() { testServer.srv, testServer.err = catalogtest.Start(ctx) })
	if testServer.err != nil {
		t.Fatalf("test server: %v", testServer.err)
	}
	url, err := testServer.srv.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// needPostgres skips a test that starts PostgreSQL under -short and fails it
// without root, like every package's tests that start it.
func needPostgres(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts PostgreSQL: skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root to run PostgreSQL as OS user postgres; run as root or with -short")
	}
}

// TestPostgresUnavailable: every way a connection to a catalog server that died
// (SIGKILL included) can fail is the catalog being unavailable, and an error the
// server returned for a statement is not.
func TestPostgresUnavailable(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("begin: %w", err) }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"EOF", wrap(io.EOF), true},
		{"unexpected EOF", wrap(io.ErrUnexpectedEOF), true},
		{"conn closed", wrap(pgconn.ErrConnClosed), true},
		{"bad conn", wrap(driver.ErrBadConn), true},
		{"ECONNRESET", wrap(os.NewSyscallError("read", syscall.ECONNRESET)), true},
		{"ECONNREFUSED", wrap(os.NewSyscallError("connect", syscall.ECONNREFUSED)), true},
		{"EPIPE", wrap(os.NewSyscallError("write", syscall.EPIPE)), true},
		{"net error", wrap(&net.OpError{Op: "read", Net: "unix", Err: syscall.ECONNRESET}), true},
		{"admin shutdown", wrap(&pgconn.PgError{Code: "57P01"}), true},
		{"connection failure", wrap(&pgconn.PgError{Code: "08006"}), true},
		{"unique violation", wrap(&pgconn.PgError{Code: "23505"}), false},
		{"canceled", wrap(context.Canceled), false},
		{"plain", errors.New("syntax"), false},
	} {
		if got := (postgresDialect{}).unavailable(tc.err); got != tc.want {
			t.Errorf("%s: unavailable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

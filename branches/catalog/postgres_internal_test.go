package catalog

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

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

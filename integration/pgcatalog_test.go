package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog/catalogtest"
)

// INTEGRATION_CATALOG=postgres runs every server the harness starts with
// `--catalog postgres://...`: a database of its own per state directory, on one
// Postgres server that TestMain starts. TestPostgresCatalogSuite runs the
// lifecycle, fork, crash, pool, source and token tests that way in a child
// `go test`.

func postgresCatalog() bool { return os.Getenv("INTEGRATION_CATALOG") == "postgres" }

// catalogs is the Postgres catalog server of a Postgres-catalog run, and the
// catalog database of each state directory (a restarted server keeps its catalog).
var catalogs struct {
	srv *catalogtest.Server
	mu  sync.Mutex
	url map[string]string
}

// startCatalogServer starts the catalog server if this is a Postgres-catalog run.
func startCatalogServer() error {
	if !postgresCatalog() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	catalogs.srv, err = catalogtest.Start(ctx)
	catalogs.url = map[string]string{}
	return err
}

func stopCatalogServer() error {
	if catalogs.srv == nil {
		return nil
	}
	return catalogs.srv.Stop()
}

// catalogArgs are the flags serve gets for the catalog under test, unless the
// test chose one itself.
func catalogArgs(t testing.TB, state string, extra []string) []string {
	t.Helper()
	if !postgresCatalog() || slices.Contains(extra, "--catalog") {
		return nil
	}
	catalogs.mu.Lock()
	defer catalogs.mu.Unlock()
	url, ok := catalogs.url[state]
	if !ok {
		var err error
		if url, err = catalogs.srv.NewDatabase(context.Background()); err != nil {
			t.Fatal(err)
		}
		catalogs.url[state] = url
	}
	return []string{"--catalog", url}
}

// TestPostgresCatalogSuite: a single host on a Postgres catalog behaves as on its
// SQLite file, through a restart after kill -9 included.
func TestPostgresCatalogSuite(t *testing.T) {
	if postgresCatalog() {
		t.Skip("this run is the Postgres-catalog one")
	}
	tests := []string{
		"TestIdleStopAndWake", "TestTTLAndEphemeral", "TestResetOnConnect", // lifecycle
		"TestBranchFromBranch", // fork
		"TestKill9AndRestart",  // crash, reconcile
		"TestWarmPool",         // pool, claim, refill, refresh, crash
		"TestSourceRefresh",    // seed generations
		"TestAdminTokens",      // tokens and audit
	}
	cmd := exec.Command("go", "test", "-count=1", "-timeout", "30m", "-v", "-run", "^("+strings.Join(tests, "|")+")$", ".")
	cmd.Env = append(os.Environ(), "INTEGRATION_CATALOG=postgres")
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--- ") || strings.HasPrefix(line, "ok") || strings.HasPrefix(line, "FAIL") {
			t.Log(line)
		}
	}
	if err != nil {
		t.Fatalf("the suite on a Postgres catalog failed: %v\n%s", err, out)
	}
	for _, name := range tests {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass on a Postgres catalog", name)
		}
	}
}

// checkCatalogBackend fails the test if a Postgres-catalog run left a SQLite
// catalog in the state directory: the server did not use the catalog it was given.
// A test that gave serve a SQLite catalog itself (args) is left alone.
func checkCatalogBackend(t testing.TB, state string, args []string) {
	t.Helper()
	if !postgresCatalog() {
		return
	}
	if i := slices.Index(args, "--catalog"); i >= 0 && i+1 < len(args) && !strings.HasPrefix(args[i+1], "postgres") {
		return
	}
	if _, err := os.Stat(filepath.Join(state, "catalog.db")); err == nil {
		t.Errorf("%s has a SQLite catalog on a Postgres-catalog run", state)
	}
}

// TestCatalogOutage: with its Postgres catalog down (shut down, or its postmaster
// killed with SIGKILL), a server keeps serving the branches that are running, to
// sessions already open and to new ones, and refuses a new branch with 57P03
// "catalog unavailable"; once the catalog is back the same server creates it.
func TestCatalogOutage(t *testing.T) {
	for _, how := range []string{"stop", "kill9"} {
		t.Run(how, func(t *testing.T) { testCatalogOutage(t, how) })
	}
}

func testCatalogOutage(t *testing.T, how string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cat, url := startCatalog(t, ctx)
	// Registered after the catalog's cleanup, so it runs first: serve stops while
	// its catalog is up.
	s := startServer(t, newStateDir(t), "--catalog", url)
	s.seedSQL("app", lifecycleSQL)
	open := s.connect(t, "app@up")

	var err error
	if how == "kill9" {
		err = cat.Kill()
	} else {
		err = cat.Pause(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	var v string
	if err := open.QueryRow(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v); err != nil || v != "seed" {
		t.Fatalf("the open session during the outage: %q %v", v, err)
	}
	if out, err := s.psql(t, "app@up", "SELECT count(*) FROM t"); err != nil || out != "1000" {
		t.Fatalf("a new session on the running branch during the outage: %q %v\n%s", out, err, s.logs())
	}
	_, err = s.connectErr("app@new")
	if code := pgCode(err); code != "57P03" || !strings.Contains(err.Error(), "catalog unavailable") {
		t.Fatalf("a new branch during the outage: %v (SQLSTATE %q), want 57P03 catalog unavailable\n%s", err, code, s.logs())
	}

	if err := cat.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := s.psql(t, "app@new", "SELECT count(*) FROM t"); err != nil || out != "1000" {
		t.Fatalf("the new branch after the outage: %q %v\n%s", out, err, s.logs())
	}
}

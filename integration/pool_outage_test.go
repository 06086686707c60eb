package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog/catalogtest"
)

// TestClaimWhileCatalogDown: a claim the catalog cannot record is not handed out.
// The connection gets 57P03 like any new branch while the catalog is down, and once
// it is back the name gets a branch that survives a restart.
func TestClaimWhileCatalogDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cat, url := startCatalog(t, ctx)
	state := newStateDir(t)
	flags := []string{"--catalog", url, "--warm", "1", "--reap-interval", "200ms"}
	s := startServer(t, state, flags...)
	s.seedSQL("app", lifecycleSQL)
	waitPool(t, s, 1)

	if err := cat.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := s.connectErr("app@during")
	if code := pgCode(err); code != "57P03" || !strings.Contains(err.Error(), "catalog unavailable") {
		t.Fatalf("a claim while the catalog is down: %v (SQLSTATE %q), want 57P03 catalog unavailable\n%s", err, code, s.logs())
	}
	if err := cat.Resume(ctx); err != nil {
		t.Fatal(err)
	}

	mustWrite(t, s, "during", "kept")
	s.kill9()
	s2 := startServer(t, state, flags...)
	if out, err := s2.psql(t, "app@during", "SELECT v FROM t WHERE id = 1"); err != nil || out != "kept" {
		t.Fatalf("the branch after a restart: %q %v, want its write\n%s", out, err, s2.logs())
	}
}

// startCatalog starts a Postgres server for catalogs, stopped when the test ends,
// and returns it with the URL of a new empty catalog database on it.
func startCatalog(t *testing.T, ctx context.Context) (*catalogtest.Server, string) {
	t.Helper()
	cat, err := catalogtest.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cat.Stop(); err != nil {
			t.Errorf("stop the catalog server: %v", err)
		}
	})
	url, err := cat.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return cat, url
}

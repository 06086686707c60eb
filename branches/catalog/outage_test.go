package catalog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog/catalogtest"
)

// A Postgres catalog that goes away, shut down or killed with SIGKILL, fails the
// calls made meanwhile with ErrUnavailable (not with an error that looks like a
// bug), and serves again, on the same *Catalog, once it is back: dead pooled
// connections are dropped, not reused.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"stop", "kill9"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			testPostgresOutage(t, how)
		})
	}
}

func testPostgresOutage(t *testing.T, how string) {
	catalog.TestNeedPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, url := startOwnServer(t, ctx)
	c, err := catalog.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	insert := func(name string) error {
		_, err := c.InsertBranch(ctx, catalog.Branch{Source: "a", Name: name, State: catalog.Creating}, "create")
		return err
	}
	// Several connections in the pool, so that dead ones are there to be reused.
	errs := run(4, func(i int) error { return insert(string(rune('a' + i))) })
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if how == "kill9" {
		err = srv.Kill()
	} else {
		err = srv.Pause(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	// Every kind of call: a transaction, a query, a statement; each fails with
	// ErrUnavailable, whether it meets a dead pooled connection or a refused dial.
	for i := range 4 {
		if err := insert("during"); !errors.Is(err, catalog.ErrUnavailable) {
			t.Fatalf("insert %d into a stopped catalog = %v, want ErrUnavailable", i, err)
		}
		if _, err := c.Branches(ctx); !errors.Is(err, catalog.ErrUnavailable) {
			t.Fatalf("read %d of a stopped catalog = %v, want ErrUnavailable", i, err)
		}
		if err := c.AddSource(ctx, catalog.Source{Name: "s", Kind: "empty"}); !errors.Is(err, catalog.ErrUnavailable) {
			t.Fatalf("AddSource %d in a stopped catalog = %v, want ErrUnavailable", i, err)
		}
	}
	if err := srv.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 8 { // more than the pool holds: every connection is a fresh one
		if err := insert("after" + string(rune('a'+i))); err != nil {
			t.Fatalf("insert %d after the catalog came back: %v", i, err)
		}
	}
	got, err := c.Branches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 12 {
		t.Errorf("%d branches after the outage, want 12 (4 before, 8 after)", len(got))
	}
}

// startOwnServer starts a catalog server of the test's own (one it may stop, kill
// and restart), stopped when the test ends, and returns it with a new database's URL.
func startOwnServer(t *testing.T, ctx context.Context) (*catalogtest.Server, string) {
	t.Helper()
	srv, err := catalogtest.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	url, err := srv.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return srv, url
}

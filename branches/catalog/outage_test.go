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
	addSources(t, c, "a")
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
	// A node whose lease ran out long ago, which a janitor that has seen the
	// catalog answer for an hour would declare dead at once.
	if _, err := c.Register(ctx, "me", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	other := openAgain(t, url)
	if _, err := other.Register(ctx, "gone", "", -time.Hour); err != nil {
		t.Fatal(err)
	}
	other.Close()
	catalog.TestSetAnswering(c, time.Hour)
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
	// A heartbeat meanwhile fails and is to be retried; the node is not lost.
	if err := c.Heartbeat(ctx, "", "", time.Minute, catalog.Load{}); !errors.Is(err, catalog.ErrUnavailable) || c.NodeLost() {
		t.Fatalf("heartbeat to a stopped catalog = %v (lost %v), want ErrUnavailable", err, c.NodeLost())
	}
	if err := srv.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Heartbeat(ctx, "", "", time.Minute, catalog.Load{}); err != nil {
		t.Fatalf("heartbeat after the catalog came back: %v", err)
	}
	// The outage stopped every node's heartbeats: no node is declared dead until
	// the catalog has answered for dead-after again.
	if s, err := c.Janitor(ctx, time.Minute); err != nil || !s.Skipped || len(s.Dead) > 0 {
		t.Fatalf("janitor just after the outage = %+v, %v, want skipped", s, err)
	}
	catalog.TestSetAnswering(c, time.Hour)
	if s, err := c.Janitor(ctx, time.Minute); err != nil || len(s.Dead) != 1 {
		t.Fatalf("janitor once the catalog has answered for dead-after = %+v, %v, want node gone dead", s, err)
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

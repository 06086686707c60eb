package catalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog/catalogtest"
)

// A Postgres catalog that goes away fails the writes made meanwhile, and serves
// again, on the same *Catalog, once it is back: dead pooled connections are
// dropped, not reused.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	catalog.TestNeedPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := catalogtest.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	url, err := srv.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
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
	if err := srv.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := insert("during"); err == nil {
		t.Fatal("an insert into a stopped catalog succeeded")
	}
	if _, err := c.Branches(ctx); err == nil {
		t.Fatal("a read of a stopped catalog succeeded")
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

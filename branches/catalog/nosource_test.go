package catalog_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestInsertBranchNeedsSource: a branch is not recorded for a source that is not
// (any more): one node removed the source, and another, which still knew it,
// inserts a branch of it afterwards; the insert is refused with ErrNoSource and
// leaves neither a row nor a transition. So is one by a process that did not
// register, of a source never added.
func TestInsertBranchNeedsSource(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, dsn := bk.open(t)
		addSources(t, c, "s")
		remover, creator := openAgain(t, dsn), openAgain(t, dsn)
		if _, err := remover.Register(ctx, "remover", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		if _, err := creator.Register(ctx, "creator", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := remover.DeleteSource(ctx, "s"); err != nil {
			t.Fatal(err)
		}
		_, err := creator.InsertBranch(ctx, catalog.Branch{Source: "s", Name: "late", State: catalog.Creating}, "create")
		if !errors.Is(err, catalog.ErrNoSource) || errors.Is(err, catalog.ErrFenced) {
			t.Fatalf("InsertBranch after DeleteSource = %v, want ErrNoSource", err)
		}
		if _, err := c.InsertBranch(ctx, catalog.Branch{Source: "never", Name: "x", State: catalog.Creating}, "create"); !errors.Is(err, catalog.ErrNoSource) {
			t.Fatalf("InsertBranch of a source never added = %v, want ErrNoSource", err)
		}
		if all, err := c.Branches(ctx); err != nil || len(all) != 0 {
			t.Fatalf("branches recorded: %+v, %v", all, err)
		}
		if tr, err := c.Transitions(ctx, "s", "late"); err != nil || len(tr) != 0 {
			t.Fatalf("transitions logged: %+v, %v", tr, err)
		}
	})
}

// TestInsertBranchWaitsForSourceRemoval: on Postgres a branch insert that comes
// while the source's removal is under way (its lock held, its row deleted, not yet
// committed) waits for it, and once it commits is refused with ErrNoSource; it
// does not record a branch of the removed source.
func TestInsertBranchWaitsForSourceRemoval(t *testing.T) {
	catalog.TestNeedPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := catalog.TestPostgresDSN(t)
	c := openAgain(t, dsn)
	addSources(t, c, "s")
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rm, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rm.Rollback()
	// What DeleteSource does before it commits.
	if _, err := rm.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('pgbranchproxy.catalog.source'), hashtext('s'))`); err != nil {
		t.Fatal(err)
	}
	if _, err := rm.ExecContext(ctx, `DELETE FROM sources WHERE name = 's'`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.InsertBranch(ctx, catalog.Branch{Source: "s", Name: "late", State: catalog.Creating}, "create")
		done <- err
	}()
	for waiting := 0; waiting == 0; {
		select {
		case err := <-done:
			t.Fatalf("InsertBranch during the source's removal returned at once: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if err := rm.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, catalog.ErrNoSource) {
		t.Fatalf("InsertBranch that waited for the source's removal = %v, want ErrNoSource", err)
	}
	if all, err := c.Branches(ctx); err != nil || len(all) != 0 {
		t.Fatalf("branches recorded: %+v, %v", all, err)
	}
}

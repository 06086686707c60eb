package catalog_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestFenceReadsNodeRow: a process whose registration was replaced (the node
// registered again elsewhere) or buried by the janitor learns it from the node
// row in the write's own transaction, before any heartbeat: it inserts no branch,
// claims no pool member and updates nothing.
func TestFenceReadsNodeRow(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, dsn := bk.open(t)
		addSources(t, c, "a")
		if _, err := c.Register(ctx, "n1", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		mine := catalog.Branch{Source: "a", Name: "mine", State: catalog.Running}
		var err error
		if mine.ID, err = c.InsertBranch(ctx, mine, "create"); err != nil {
			t.Fatal(err)
		}
		pooled := catalog.Branch{Source: "a", Name: "pool-1", State: catalog.Running, Pooled: true}
		if pooled.ID, err = c.InsertBranch(ctx, pooled, "fill pool"); err != nil {
			t.Fatal(err)
		}
		// The same node registers again in another process: epoch 2.
		elsewhere := openAgain(t, dsn)
		if _, err := elsewhere.Register(ctx, "n1", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		if _, err := c.InsertBranch(ctx, catalog.Branch{Source: "a", Name: "late", State: catalog.Creating}, "create"); !errors.Is(err, catalog.ErrNodeLost) {
			t.Fatalf("InsertBranch under a replaced epoch = %v, want ErrNodeLost", err)
		}
		if _, ok := branchByName(t, c, "late"); ok {
			t.Fatal("a replaced registration inserted a branch")
		}
		if !c.NodeLost() {
			t.Fatal("the fenced insert did not mark the node lost")
		}
		// A fresh handle of the old epoch (no cached verdict) is refused too.
		stale := openAgain(t, dsn)
		if _, err := stale.Register(ctx, "n2", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		catalog.TestSetAnswering(elsewhere, 2*time.Minute)
		if _, err := stale.Register(ctx, "n2", "", -time.Hour); err != nil {
			t.Fatal(err)
		}
		if s, err := elsewhere.Janitor(ctx, time.Minute); err != nil || len(s.Dead) != 1 || s.Dead[0] != "n2" {
			t.Fatalf("Janitor = %+v, %v, want n2 dead", s, err)
		}
		if _, err := stale.InsertBranch(ctx, catalog.Branch{Source: "a", Name: "zombie", State: catalog.Creating}, "create"); !errors.Is(err, catalog.ErrNodeLost) {
			t.Fatalf("InsertBranch by a buried node = %v, want ErrNodeLost", err)
		}
		if err := stale.ClaimBranch(ctx, pooled.ID, catalog.Claim{Name: "claimed", At: time.Now()}, "claim"); !errors.Is(err, catalog.ErrFenced) {
			t.Fatalf("ClaimBranch by a buried node = %v, want ErrFenced", err)
		}
		if _, ok := branchByName(t, c, "zombie"); ok {
			t.Fatal("a buried node inserted a branch")
		}
		// The live registration still writes.
		mine.State = catalog.Stopped
		if err := elsewhere.UpdateBranch(ctx, mine, "stop"); err != nil {
			t.Fatalf("UpdateBranch by the live registration: %v", err)
		}
	})
}

// TestLostRowIsErrLost: a write to a branch row the janitor declared lost says
// so (ErrLost, still ErrFenced), both from the buried registration itself and
// from a live registration of the same node.
func TestLostRowIsErrLost(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, dsn := bk.open(t)
		addSources(t, c, "a")
		if _, err := c.Register(ctx, "n1", "", -time.Hour); err != nil {
			t.Fatal(err)
		}
		b := catalog.Branch{Source: "a", Name: "b", State: catalog.Stopped}
		var err error
		if b.ID, err = c.InsertBranch(ctx, b, "create"); err != nil {
			t.Fatal(err)
		}
		janitor := openAgain(t, dsn)
		if _, err := janitor.Register(ctx, "n2", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		catalog.TestSetAnswering(janitor, 2*time.Minute)
		if s, err := janitor.Janitor(ctx, time.Minute); err != nil || s.Lost != 1 {
			t.Fatalf("Janitor = %+v, %v, want n1's branch lost", s, err)
		}
		wake := b
		wake.State = catalog.Starting
		err = c.UpdateBranch(ctx, wake, "wake")
		if !errors.Is(err, catalog.ErrLost) || !errors.Is(err, catalog.ErrNodeLost) || !errors.Is(err, catalog.ErrFenced) {
			t.Fatalf("UpdateBranch by the buried node = %v, want ErrLost and ErrNodeLost", err)
		}
		again := openAgain(t, dsn)
		if _, err := again.Register(ctx, "n1", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		err = again.UpdateBranch(ctx, wake, "wake")
		if !errors.Is(err, catalog.ErrLost) || !errors.Is(err, catalog.ErrFenced) || errors.Is(err, catalog.ErrNodeLost) {
			t.Fatalf("UpdateBranch by the node registered again = %v, want ErrLost, not ErrNodeLost", err)
		}
	})
}

// TestFenceWaitsForRegistration: on Postgres the node row is locked by the
// fenced write's own statement, so a registration elsewhere that is under way
// (its epoch written, not yet committed) makes the write wait, and once it
// commits the write finds its registration gone and changes nothing; it does not
// go through on the epoch it read before the registration committed.
func TestFenceWaitsForRegistration(t *testing.T) {
	catalog.TestNeedPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := catalog.TestPostgresDSN(t)
	c := openAgain(t, dsn)
	addSources(t, c, "a")
	if _, err := c.Register(ctx, "n1", "", time.Hour); err != nil {
		t.Fatal(err)
	}
	b := catalog.Branch{Source: "a", Name: "b", State: catalog.Running}
	var err error
	if b.ID, err = c.InsertBranch(ctx, b, "create"); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Rollback()
	if _, err := reg.ExecContext(ctx, `UPDATE nodes SET epoch = epoch + 1 WHERE id = 'n1'`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	stop := b
	stop.State = catalog.Stopped
	go func() { done <- c.UpdateBranch(ctx, stop, "stop") }()
	for waiting := 0; waiting == 0; {
		select {
		case err := <-done:
			t.Fatalf("UpdateBranch during a registration returned at once: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, catalog.ErrNodeLost) {
		t.Fatalf("UpdateBranch that waited for a registration = %v, want ErrNodeLost", err)
	}
	if got, _ := branchByName(t, c, "b"); got.State != catalog.Running {
		t.Fatalf("the branch after the refused write is %s, want running", got.State)
	}
}

package catalog_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestRegistrationRolledBack: a failover to an asynchronous standby that had
// not received a node's registration leaves its row at an older epoch (or no
// row at all, for a first registration). The node is not lost: its writes fail
// as unavailable (ErrRolledBack) rather than marking it lost, its heartbeat
// says ErrRolledBack, and Reregister makes it the node's again above every
// epoch, with its slot, adopting its rows. A registration by another process
// since is still a loss.
func TestRegistrationRolledBack(t *testing.T) {
	catalog.TestNeedPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := catalog.TestPostgresDSN(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	c := openAgain(t, dsn)
	addSources(t, c, "a")
	for range 2 { // a node started twice: epoch 2
		if _, err := c.Register(ctx, "n1", "", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	mine := catalog.Branch{Source: "a", Name: "mine", State: catalog.Running}
	if mine.ID, err = c.InsertBranch(ctx, mine, "create"); err != nil {
		t.Fatal(err)
	}
	// What the standby had: the first registration, and its adoption of the row.
	exec(`UPDATE nodes SET epoch = 1 WHERE id = 'n1'`)
	exec(`UPDATE branches SET node_epoch = 1 WHERE node_id = 'n1'`)

	mine.State = catalog.Stopped
	if err := c.UpdateBranch(ctx, mine, "stop"); !errors.Is(err, catalog.ErrRolledBack) || !errors.Is(err, catalog.ErrUnavailable) {
		t.Fatalf("UpdateBranch under a rolled-back registration = %v, want ErrRolledBack and ErrUnavailable", err)
	}
	if err := c.Heartbeat(ctx, "", "", time.Hour, catalog.Load{}); !errors.Is(err, catalog.ErrRolledBack) || errors.Is(err, catalog.ErrNodeLost) {
		t.Fatalf("Heartbeat under a rolled-back registration = %v, want ErrRolledBack, not ErrNodeLost", err)
	}
	if c.NodeLost() {
		t.Fatal("a rolled-back registration was marked lost")
	}
	n, before, err := c.Reregister(ctx, "10.0.0.1:7432", time.Hour)
	if err != nil || before != 2 || n.Epoch != 3 || n.Slot != 1 || n.State != catalog.NodeActive {
		t.Fatalf("Reregister = %+v, before %d, %v; want epoch 3 (above the 2 it held), slot 1, active, before 2", n, before, err)
	}
	if _, epoch, _ := c.Registration(); epoch != 3 {
		t.Fatalf("Registration after Reregister: epoch %d, want 3", epoch)
	}
	if err := c.UpdateBranch(ctx, mine, "stop"); err != nil {
		t.Fatalf("UpdateBranch after Reregister (the row adopted): %v", err)
	}
	if err := c.Heartbeat(ctx, "", "", time.Hour, catalog.Load{}); err != nil {
		t.Fatalf("Heartbeat after Reregister: %v", err)
	}
	if got, _ := branchByName(t, c, "mine"); got.NodeEpoch != 3 || got.State != catalog.Stopped {
		t.Fatalf("the row after Reregister: epoch %d %s, want 3 stopped", got.NodeEpoch, got.State)
	}
	// Not rolled back: unchanged.
	if n, before, err := c.Reregister(ctx, "", time.Hour); err != nil || before != 3 || n.Epoch != 3 {
		t.Fatalf("Reregister of a registration that is the node's = %+v, before %d, %v; want epoch 3 unchanged", n, before, err)
	}

	// A first registration the standby never had: no row.
	c2 := openAgain(t, dsn)
	if _, err := c2.Register(ctx, "n2", "", time.Hour); err != nil {
		t.Fatal(err)
	}
	exec(`DELETE FROM nodes WHERE id = 'n2'`)
	if err := c2.Heartbeat(ctx, "", "", time.Hour, catalog.Load{}); !errors.Is(err, catalog.ErrRolledBack) {
		t.Fatalf("Heartbeat with no node row = %v, want ErrRolledBack", err)
	}
	if n, _, err := c2.Reregister(ctx, "", time.Hour); err != nil || n.Epoch != 2 || n.Slot != 2 {
		t.Fatalf("Reregister with no node row = %+v, %v; want epoch 2, its slot 2", n, err)
	}

	// Another process of n1 registered since: lost, and Reregister does not take it back.
	other := openAgain(t, dsn)
	if _, err := other.Register(ctx, "n1", "", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.Heartbeat(ctx, "", "", time.Hour, catalog.Load{}); !errors.Is(err, catalog.ErrNodeLost) {
		t.Fatalf("Heartbeat after another registration = %v, want ErrNodeLost", err)
	}
	if _, _, err := c.Reregister(ctx, "", time.Hour); !errors.Is(err, catalog.ErrNodeLost) {
		t.Fatalf("Reregister after another registration = %v, want ErrNodeLost", err)
	}
	if got := nodeByID(t, other, "n1"); got.Epoch != 4 {
		t.Fatalf("n1 after the other registration: epoch %d, want 4", got.Epoch)
	}
}

package catalog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestDeleteLostWhileLost: a row declared lost is deleted by its id only while it
// is still lost. A front (no registration) and a node each hold the lost row as
// they read it; another node deletes it and makes the name again (on SQLite the
// new row takes the freed id). The stale deletes delete nothing and fail, and the
// new branch is kept; a row that never was lost is not deleted as lost either.
func TestDeleteLostWhileLost(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		front, dsn := bk.open(t)
		addSources(t, front, "a")
		dead := openAgain(t, dsn)
		if _, err := dead.Register(ctx, "dead", "", -time.Hour); err != nil {
			t.Fatal(err)
		}
		b := catalog.Branch{Source: "a", Name: "x", State: catalog.Running}
		var err error
		if b.ID, err = dead.InsertBranch(ctx, b, "create"); err != nil {
			t.Fatal(err)
		}
		live, other := openAgain(t, dsn), openAgain(t, dsn)
		if _, err := live.Register(ctx, "live", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Register(ctx, "other", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		catalog.TestSetAnswering(live, 2*time.Minute)
		if s, err := live.Janitor(ctx, time.Minute); err != nil || s.Lost != 1 {
			t.Fatalf("Janitor = %+v, %v, want the branch lost", s, err)
		}
		lost, _ := branchByName(t, front, "x")
		if lost.State != catalog.Lost {
			t.Fatalf("the branch is %s, want lost", lost.State)
		}
		if err := live.DeleteBranch(ctx, lost, "destroyed"); err != nil {
			t.Fatalf("a node deleting a lost row: %v", err)
		}
		again := catalog.Branch{Source: "a", Name: "x", State: catalog.Running}
		if again.ID, err = live.InsertBranch(ctx, again, "create"); err != nil {
			t.Fatal(err)
		}
		if bk.name == "sqlite" && again.ID != lost.ID {
			t.Fatalf("SQLite gave the new row id %d, not the freed %d", again.ID, lost.ID)
		}
		for who, c := range map[string]*catalog.Catalog{"front": front, "owner": live, "another node": other} {
			err := c.DeleteBranch(ctx, lost, "recreated")
			if !errors.Is(err, catalog.ErrNotFound) && !errors.Is(err, catalog.ErrFenced) {
				t.Fatalf("a stale delete of the lost row by the %s = %v, want it refused", who, err)
			}
			if got, ok := branchByName(t, front, "x"); !ok || got.ID != again.ID || got.State != catalog.Running {
				t.Fatalf("after a stale delete by the %s the branch is %+v, %v; want the new one kept", who, got, ok)
			}
		}
		// The same id, the row not lost: what the stale delete finds on SQLite.
		notLost := again
		notLost.State = catalog.Lost
		for who, c := range map[string]*catalog.Catalog{"front": front, "owner": live} {
			if err := c.DeleteBranch(ctx, notLost, "recreated"); !errors.Is(err, catalog.ErrFenced) {
				t.Fatalf("a delete as lost by the %s of a row that is not lost = %v, want ErrFenced", who, err)
			}
		}
		if got, ok := branchByName(t, front, "x"); !ok || got.ID != again.ID {
			t.Fatalf("a row that is not lost was deleted as lost: %+v, %v", got, ok)
		}
	})
}

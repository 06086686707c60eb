package branches

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/failpoint"
)

// lostOfDeadNode makes a node of several (n1) beside a node n2 that the
// janitor declared dead, with n2's branch "gone" lost; it returns the lost row.
func lostOfDeadNode(t *testing.T) (*Manager, catalog.Branch) {
	t.Helper()
	ctx := context.Background()
	m := newUnitManager(t, "")
	m.cfg.Join = true
	if _, err := m.cat.Register(ctx, "n1", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	dead, err := catalog.Open(filepath.Join(m.cfg.StateDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	if _, err := dead.Register(ctx, "n2", "", -time.Hour); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC()
	if _, err := dead.InsertBranch(ctx, catalog.Branch{Source: "s", Name: "gone", SeedID: 1, State: catalog.Stopped, CreatedAt: t0, StateAt: t0}, "test"); err != nil {
		t.Fatal(err)
	}
	if s, err := m.cat.Janitor(ctx, time.Nanosecond); err != nil || s.Lost != 1 {
		t.Fatalf("Janitor = %+v, %v, want n2's branch lost", s, err)
	}
	all, err := m.cat.Branches(ctx)
	if err != nil || len(all) != 1 || all[0].State != catalog.Lost {
		t.Fatalf("rows %+v, %v, want the lost branch", all, err)
	}
	return m, all[0]
}

// TestDestroyLostElsewhere: a lost branch that this node does not hold (it was
// running when its node was declared dead) is any node's to destroy, as a front
// asks of any live node, and its name is then free; a reset is refused as for
// a lost branch held here. Both said "not found".
func TestDestroyLostElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, _ := lostOfDeadNode(t)
	if err := m.Reset(ctx, "", "gone", OpOptions{}); !errors.Is(err, ErrLost) {
		t.Fatalf("reset of a lost branch held elsewhere: %v, want ErrLost", err)
	}
	if err := m.Destroy(ctx, "", "gone", OpOptions{}); err != nil {
		t.Fatalf("destroy of a lost branch held elsewhere: %v", err)
	}
	if all, err := m.cat.Branches(ctx); err != nil || len(all) != 0 {
		t.Fatalf("rows after the destroy: %+v, %v, want none", all, err)
	}
	if err := m.Destroy(ctx, "", "gone", OpOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("destroy again: %v, want not found", err)
	}
}

// TestLostRowGone: a lost branch this node holds (reconcile loads every node's
// lost rows) whose row was removed through another process (a destroy through
// a front, a front making the name again from the seed) is forgotten, at a new
// connection and at the reaper's comparison; it was refused as lost for good,
// and the front's recreation with it. One whose row is still there stays.
func TestLostRowGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, row := lostOfDeadNode(t)
	k := key{"s", "gone"}
	hold := func() { m.branches[k] = &branch{rec: row} }
	held := func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.branches[k] != nil
	}
	hold()
	if m.lostRowGone(ctx, k, row.ID) || !held() {
		t.Fatal("a lost branch whose row is there was forgotten")
	}
	if err := m.dropOrphans(ctx); err != nil || !held() {
		t.Fatalf("the reaper's comparison with the row there: %v, held %v", err, held())
	}
	if err := m.cat.DeleteBranch(ctx, row, "destroyed through another node"); err != nil {
		t.Fatal(err)
	}
	if !m.lostRowGone(ctx, k, row.ID) || held() {
		t.Fatal("a lost branch whose row was removed is still held")
	}
	hold()
	if err := m.dropOrphans(ctx); err != nil || held() {
		t.Fatalf("the reaper's comparison after the row was removed: %v, held %v", err, held())
	}
}

// TestCreateAfterLostRowGone: branch create (the admin API, as a front passes
// it to the node it places the name on) of a name whose lost row was removed
// through another process creates it, as a connection does; it said the branch
// existed until the reaper's next comparison. While the lost row is there it
// still does.
func TestCreateAfterLostRowGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, row := lostOfDeadNode(t)
	k := key{"s", "gone"}
	m.branches[k] = &branch{rec: row}
	if err := m.Create(ctx, "gone", CreateOptions{Source: "s"}); !errors.Is(err, ErrExists) {
		t.Fatalf("create of a held lost branch whose row is there: %v, want ErrExists", err)
	}
	if err := m.cat.DeleteBranch(ctx, row, "destroyed through another node"); err != nil {
		t.Fatal(err)
	}
	// The creation itself stops at its first step after the row's insert.
	set, err := failpoint.Parse(failpoint.Catalog + string(catalog.Creating) + "=error")
	if err != nil {
		t.Fatal(err)
	}
	m.cfg.Failpoints = set
	if err := m.Create(ctx, "gone", CreateOptions{Source: "s"}); !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("create after the lost row was removed: %v, want the creation tried", err)
	}
	m.mu.Lock()
	b := m.branches[k]
	m.mu.Unlock()
	if b != nil && b.rec.ID == row.ID {
		t.Fatal("the lost branch whose row was removed is still held")
	}
}

// TestDestroyLostElsewhereAmbiguous: destroy without a source of a name that
// the catalog has in two sources, one lost and one on another node, is refused
// as it is for two branches held here; it removed whichever row came first,
// the lost one, whichever the caller meant.
func TestDestroyLostElsewhereAmbiguous(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, _ := lostOfDeadNode(t)
	other, err := catalog.Open(filepath.Join(m.cfg.StateDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Register(ctx, "n3", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := other.AddSource(ctx, catalog.Source{Name: "t", Kind: "empty"}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC()
	if _, err := other.InsertBranch(ctx, catalog.Branch{Source: "t", Name: "gone", SeedID: 1, State: catalog.Stopped, CreatedAt: t0, StateAt: t0}, "test"); err != nil {
		t.Fatal(err)
	}
	if err := m.Destroy(ctx, "", "gone", OpOptions{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("destroy of a name in two sources, without one: %v, want ErrInvalid", err)
	}
	if all, err := m.cat.Branches(ctx); err != nil || len(all) != 2 {
		t.Fatalf("rows after the refused destroy: %+v, %v, want both", all, err)
	}
	if err := m.Destroy(ctx, "s", "gone", OpOptions{}); err != nil {
		t.Fatalf("destroy of the lost one, its source named: %v", err)
	}
}

// TestRemoveSourceLostOnce: source rm counts a lost branch of another node,
// which this node holds since its start, once, among the other nodes'; it
// said "1 branches on this node and 1 on other nodes" of the one branch.
func TestRemoveSourceLostOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, row := lostOfDeadNode(t)
	seeds, err := m.cat.Seeds(ctx)
	if err != nil || len(seeds) != 1 {
		t.Fatalf("seeds: %v %v", seeds, err)
	}
	m.sources["s"] = &sourceState{src: catalog.Source{Name: "s", Kind: "empty"}, seed: &seeds[0]}
	m.branches[key{"s", "gone"}] = &branch{rec: row}
	err = m.RemoveSource(ctx, "s")
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "0 branches on this node and 1 on other nodes") {
		t.Fatalf("RemoveSource with another node's lost branch held here: %v", err)
	}
}

package catalog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// openAgain opens a second handle on the catalog at dsn: another process on the
// same catalog.
func openAgain(t *testing.T, dsn string) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func nodeByID(t *testing.T, c *catalog.Catalog, id string) catalog.Node {
	t.Helper()
	ns, err := c.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if n.ID == id {
			return n
		}
	}
	t.Fatalf("no node %s in %+v", id, ns)
	return catalog.Node{}
}

func branchByName(t *testing.T, c *catalog.Catalog, name string) (catalog.Branch, bool) {
	t.Helper()
	bs, err := c.Branches(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Name == name {
			return b, true
		}
	}
	return catalog.Branch{}, false
}

// TestRegister: a new node gets the lowest free slot and epoch 1; registering
// again keeps the slot and adds one to the epoch; the first node adopts rows from
// before nodes, whose writes are fenced from then on.
func TestRegister(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, dsn := bk.open(t)
		addSources(t, c, "a")
		old := catalog.Branch{Source: "a", Name: "old", State: catalog.Running}
		var err error
		if old.ID, err = c.InsertBranch(ctx, old, "before nodes"); err != nil {
			t.Fatal(err)
		}
		n1, err := c.Register(ctx, "n1", "10.0.0.1:5432", time.Minute)
		if err != nil {
			t.Fatalf("Register: %v", err)
		}
		if n1.Slot != 1 || n1.Epoch != 1 || n1.State != catalog.NodeActive {
			t.Fatalf("first registration = %+v, want slot 1, epoch 1, active", n1)
		}
		other := openAgain(t, dsn)
		n2, err := other.Register(ctx, "n2", "10.0.0.2:5432", time.Minute)
		if err != nil || n2.Slot != 2 || n2.Epoch != 1 {
			t.Fatalf("second node = %+v, %v, want slot 2, epoch 1", n2, err)
		}
		again, err := c.Register(ctx, "n1", "10.0.0.1:6432", time.Minute)
		if err != nil || again.Slot != 1 || again.Epoch != 2 {
			t.Fatalf("re-registration = %+v, %v, want slot 1, epoch 2", again, err)
		}
		got := nodeByID(t, c, "n1")
		if got.Addr != "10.0.0.1:6432" || got.Epoch != 2 || got.LeaseAge >= 0 {
			t.Fatalf("n1 reads %+v, want the new address, epoch 2 and a running lease", got)
		}
		if b, _ := branchByName(t, c, "old"); b.NodeID != "n1" || b.NodeEpoch != 2 {
			t.Fatalf("the row from before nodes is owned by %q at epoch %d, want n1 at 2", b.NodeID, b.NodeEpoch)
		}
		// The adopted row is n1's: n1 may write it, n2 may not.
		old.State = catalog.Stopped
		if err := other.UpdateBranch(ctx, old, "not mine"); !errors.Is(err, catalog.ErrFenced) {
			t.Fatalf("another node's UpdateBranch = %v, want ErrFenced", err)
		}
		if err := c.UpdateBranch(ctx, old, "stop"); err != nil {
			t.Fatalf("owner's UpdateBranch: %v", err)
		}
		if id, epoch, ok := c.Registration(); !ok || id != "n1" || epoch != 2 {
			t.Fatalf("Registration = %s, %d, %v", id, epoch, ok)
		}
		// A catalog bound anew to a state directory: its rows go to no node, and
		// the next to register adopts them.
		if err := c.ClearOwners(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Register(ctx, "n2", "", time.Minute); err != nil {
			t.Fatal(err)
		}
		if b, _ := branchByName(t, c, "old"); b.NodeID != "n2" || b.NodeEpoch != 2 {
			t.Fatalf("after ClearOwners the row is %q's at epoch %d, want n2's at 2", b.NodeID, b.NodeEpoch)
		}
	})
}

// TestHeartbeat: a heartbeat renews the lease and records the load; one from an
// epoch that is no longer the node's changes nothing, fails with ErrNodeLost,
// and every fenced write after it fails too.
func TestHeartbeat(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, dsn := bk.open(t)
		addSources(t, c, "a")
		if _, err := c.Register(ctx, "n1", "", time.Second); err != nil {
			t.Fatal(err)
		}
		before := nodeByID(t, c, "n1")
		load := catalog.Load{Running: 3, MaxRunning: 8, FreeBytes: 1 << 30}
		if err := c.Heartbeat(ctx, "127.0.0.1:6432", "", time.Hour, load); err != nil {
			t.Fatalf("Heartbeat: %v", err)
		}
		after := nodeByID(t, c, "n1")
		if !after.LeaseUntil.After(before.LeaseUntil) || after.Load != load || after.Addr != "127.0.0.1:6432" {
			t.Fatalf("after a heartbeat n1 = %+v (before %+v), want a later lease, the load and the address", after, before)
		}
		b := catalog.Branch{Source: "a", Name: "x", State: catalog.Running}
		var err error
		if b.ID, err = c.InsertBranch(ctx, b, "create"); err != nil {
			t.Fatal(err)
		}
		// The same node registers again elsewhere: epoch 2.
		newer := openAgain(t, dsn)
		if _, err := newer.Register(ctx, "n1", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		err = c.Heartbeat(ctx, "127.0.0.1:6432", "", time.Hour, catalog.Load{Running: 99})
		if !errors.Is(err, catalog.ErrNodeLost) || !errors.Is(err, catalog.ErrFenced) || !c.NodeLost() {
			t.Fatalf("stale heartbeat = %v (lost %v), want ErrNodeLost and ErrFenced", err, c.NodeLost())
		}
		if got := nodeByID(t, c, "n1"); got.Load.Running == 99 || got.Epoch != 2 {
			t.Fatalf("a stale heartbeat changed the row: %+v", got)
		}
		if dead, err := c.DeclaredDead(ctx); dead || err != nil {
			t.Fatalf("DeclaredDead of a registration another process took = %v, %v, want false", dead, err)
		}
		if _, err := c.InsertBranch(ctx, catalog.Branch{Source: "a", Name: "y", State: catalog.Creating}, "create"); !errors.Is(err, catalog.ErrNodeLost) {
			t.Fatalf("InsertBranch after the registration was lost = %v, want ErrNodeLost", err)
		}
		if err := newer.Heartbeat(ctx, "", "", time.Hour, catalog.Load{}); err != nil {
			t.Fatalf("the current registration's heartbeat: %v", err)
		}
	})
}

// TestFencedUpdate: an owner at a stale epoch gets ErrFenced from every branch
// write and changes nothing; the owner at the current epoch writes.
func TestFencedUpdate(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		stale, dsn := bk.open(t)
		addSources(t, stale, "a")
		if _, err := stale.Register(ctx, "n1", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		b := catalog.Branch{Source: "a", Name: "x", State: catalog.Running, LastUsedAt: at(1)}
		var err error
		if b.ID, err = stale.InsertBranch(ctx, b, "create"); err != nil {
			t.Fatal(err)
		}
		current := openAgain(t, dsn)
		if _, err := current.Register(ctx, "n1", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		wantRow, _ := branchByName(t, current, "x")
		wantLog, err := current.Transitions(ctx, "a", "x")
		if err != nil {
			t.Fatal(err)
		}
		upd := b
		upd.State, upd.PID = catalog.Stopped, 42
		if err := stale.UpdateBranch(ctx, upd, "stale"); !errors.Is(err, catalog.ErrFenced) {
			t.Fatalf("UpdateBranch at a stale epoch = %v, want ErrFenced", err)
		}
		if err := stale.DeleteBranch(ctx, b, "stale"); !errors.Is(err, catalog.ErrFenced) {
			t.Fatalf("DeleteBranch at a stale epoch = %v, want ErrFenced", err)
		}
		// The node row says the registration is gone: Touch fails as a whole.
		if err := stale.Touch(ctx, map[int64]time.Time{b.ID: at(9)}); !errors.Is(err, catalog.ErrNodeLost) {
			t.Fatalf("Touch at a stale epoch = %v, want ErrNodeLost", err)
		}
		gotRow, ok := branchByName(t, current, "x")
		gotLog, _ := current.Transitions(ctx, "a", "x")
		if !ok || gotRow.State != wantRow.State || gotRow.PID != wantRow.PID || !gotRow.LastUsedAt.Equal(wantRow.LastUsedAt) || len(gotLog) != len(wantLog) {
			t.Fatalf("stale writes changed the branch: %+v (%d transitions), want %+v (%d)", gotRow, len(gotLog), wantRow, len(wantLog))
		}
		if err := current.UpdateBranch(ctx, upd, "stop"); err != nil {
			t.Fatalf("UpdateBranch at the current epoch: %v", err)
		}
		if got, _ := branchByName(t, current, "x"); got.State != catalog.Stopped || got.PID != 42 {
			t.Fatalf("after the current owner's update: %+v", got)
		}
		nope := b
		nope.ID = b.ID + 1000
		if err := current.UpdateBranch(ctx, nope, "x"); !errors.Is(err, catalog.ErrNotFound) {
			t.Fatalf("UpdateBranch of no row = %v, want ErrNotFound", err)
		}
	})
}

// TestJanitor: a node whose lease ran out more than dead-after ago is declared
// dead, its branches lost and its Creating rows deleted, once the catalog has
// answered for dead-after; not before, never the node running the janitor, and
// only once.
func TestJanitor(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, dsn := bk.open(t)
		addSources(t, c, "a")
		// Both leases ran out an hour ago.
		if _, err := c.Register(ctx, "me", "", -time.Hour); err != nil {
			t.Fatal(err)
		}
		other := openAgain(t, dsn)
		if _, err := other.Register(ctx, "gone", "", -time.Hour); err != nil {
			t.Fatal(err)
		}
		var err error
		running := catalog.Branch{Source: "a", Name: "running", State: catalog.Running}
		if running.ID, err = other.InsertBranch(ctx, running, "create"); err != nil {
			t.Fatal(err)
		}
		if _, err := other.InsertBranch(ctx, catalog.Branch{Source: "a", Name: "half", State: catalog.Creating}, "create"); err != nil {
			t.Fatal(err)
		}
		mine := catalog.Branch{Source: "a", Name: "mine", State: catalog.Running}
		if mine.ID, err = c.InsertBranch(ctx, mine, "create"); err != nil {
			t.Fatal(err)
		}
		// The dead node was adding source "half" (its first seed building) and
		// building a new seed of "a".
		addSources(t, c, "half")
		for _, src := range []string{"half", "a"} {
			if _, err := other.AddSeed(ctx, catalog.Seed{Source: src}); err != nil {
				t.Fatal(err)
			}
		}
		s, err := c.Janitor(ctx, time.Minute)
		if err != nil || !s.Skipped || len(s.Dead) > 0 {
			t.Fatalf("Janitor just after Open = %+v, %v, want skipped: the catalog has answered for less than dead-after", s, err)
		}
		if n := nodeByID(t, c, "gone"); n.State != catalog.NodeActive {
			t.Fatalf("a skipped pass declared %+v", n)
		}
		catalog.TestSetAnswering(c, 2*time.Minute)
		s, err = c.Janitor(ctx, time.Minute)
		if err != nil || len(s.Dead) != 1 || s.Dead[0] != "gone" || s.Lost != 1 || s.Deleted != 1 || s.Seeds != 2 ||
			len(s.Sources) != 1 || s.Sources[0] != "half" {
			t.Fatalf("Janitor = %+v, %v, want node gone dead, 1 branch lost, 1 creating row deleted, its 2 seed builds "+
				"deleted, and source half, which it was adding", s, err)
		}
		if srcs, err := c.Sources(ctx); err != nil || len(srcs) != 1 || srcs[0].Name != "a" {
			t.Fatalf("sources after the janitor: %+v %v, want a only", srcs, err)
		}
		if n := nodeByID(t, c, "gone"); n.State != catalog.NodeDead {
			t.Fatalf("node gone is %s, want dead", n.State)
		}
		if n := nodeByID(t, c, "me"); n.State != catalog.NodeActive {
			t.Fatalf("the janitor declared its own node %s", n.State)
		}
		if b, _ := branchByName(t, c, "running"); b.State != catalog.Lost {
			t.Fatalf("the dead node's running branch is %s, want lost", b.State)
		}
		if _, ok := branchByName(t, c, "half"); ok {
			t.Fatal("the dead node's creating row is still there")
		}
		if b, _ := branchByName(t, c, "mine"); b.State != catalog.Running {
			t.Fatalf("the janitor's own branch is %s", b.State)
		}
		tr, _ := c.Transitions(ctx, "a", "running")
		if last := tr[len(tr)-1]; last.From != "running" || last.To != "lost" {
			t.Fatalf("last transition %+v, want running to lost", last)
		}
		if s, err := c.Janitor(ctx, time.Minute); err != nil || len(s.Dead) != 0 || s.Lost != 0 {
			t.Fatalf("second Janitor = %+v, %v, want nothing to do", s, err)
		}
		// The dead node learns it at its next heartbeat; its writes are fenced.
		if dead, err := other.DeclaredDead(ctx); dead || err != nil {
			t.Fatalf("DeclaredDead before the registration is found gone = %v, %v", dead, err)
		}
		if err := other.Heartbeat(ctx, "", "", time.Hour, catalog.Load{}); !errors.Is(err, catalog.ErrNodeLost) {
			t.Fatalf("dead node's heartbeat = %v, want ErrNodeLost", err)
		}
		if dead, err := other.DeclaredDead(ctx); !dead || err != nil {
			t.Fatalf("DeclaredDead of a node the janitor buried = %v, %v", dead, err)
		}
		// Registering again makes it active, without adopting its lost rows,
		// which any node may delete.
		again := openAgain(t, dsn)
		if n, err := again.Register(ctx, "gone", "", time.Hour); err != nil || n.Epoch != 2 {
			t.Fatalf("re-registration of a dead node = %+v, %v", n, err)
		}
		lost := running
		lost.State = catalog.Running
		if err := again.UpdateBranch(ctx, lost, "revive"); !errors.Is(err, catalog.ErrFenced) {
			t.Fatalf("UpdateBranch of a lost row = %v, want ErrFenced", err)
		}
		if err := c.DeleteBranch(ctx, running, "destroy lost"); err != nil {
			t.Fatalf("DeleteBranch of a lost row: %v", err)
		}
	})
}

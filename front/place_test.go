package front

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestPlaceOnHolders: a new name goes to a live node that holds its source's
// newest seed; when no live node holds it, to any live node (which copies it).
func TestPlaceOnHolders(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	seeds, err := r.cat.Seeds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	newest := catalog.NewestSeeds(seeds)["app"]
	r.node("a", "10.0.0.1:1", time.Hour, 0)
	holder := r.node("b", "10.0.0.2:1", time.Hour, 0)
	r.node("c", "10.0.0.3:1", time.Hour, 0)
	if err := holder.AddSeedCopy(ctx, newest.ID); err != nil {
		t.Fatal(err)
	}
	spread := func() map[string]int {
		got := map[string]int{}
		b := New(r.cat, nil)
		for i := range 32 {
			addr, err := addrOf(t, b, fmt.Sprintf("app@n%d", i))
			if err != nil {
				t.Fatal(err)
			}
			got[addr]++
		}
		return got
	}
	if got := spread(); got["10.0.0.2:1"] != 32 {
		t.Fatalf("with one holder: %v, want all on b", got)
	}
	if err := holder.Heartbeat(ctx, "10.0.0.2:1", "", -time.Second, catalog.Load{}); err != nil {
		t.Fatal(err)
	}
	if got := spread(); len(got) != 2 || got["10.0.0.2:1"] != 0 {
		t.Fatalf("with the holder away: %v, want a and c", got)
	}
}

// TestPlaceSkipsDraining: no new name goes to a draining node.
func TestPlaceSkipsDraining(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.node("a", "10.0.0.1:1", time.Hour, 0)
	r.node("b", "10.0.0.2:1", time.Hour, 0)
	if err := r.cat.SetDraining(ctx, "b", true); err != nil {
		t.Fatal(err)
	}
	b := New(r.cat, nil)
	for i := range 16 {
		if addr, err := addrOf(t, b, fmt.Sprintf("app@d%d", i)); err != nil || addr != "10.0.0.1:1" {
			t.Fatalf("placed on %q (%v), want only a", addr, err)
		}
	}
}

// TestRerouteToWinner: a new name's lease, refused by its node, follows the name
// to the node whose row won it, or, with no row, to where the name is placed
// now; not to the node it was placed on, and a lease of a branch that had a row
// has nowhere else to go.
func TestRerouteToWinner(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	nodes := map[string]*catalog.Catalog{
		"10.0.0.1:1": r.node("a", "10.0.0.1:1", time.Hour, 0),
		"10.0.0.2:1": r.node("b", "10.0.0.2:1", time.Hour, 0),
	}
	b := New(r.cat, nil)
	l, err := b.Acquire(ctx, route(t, "app@x"))
	if err != nil {
		t.Fatal(err)
	}
	placed := l.(*lease)
	if next, err := placed.Reroute(ctx); next != nil || err != nil {
		t.Fatalf("reroute with no row anywhere: %v %v", next, err)
	}
	other := "10.0.0.1:1"
	if placed.addr == other {
		other = "10.0.0.2:1"
	}
	// The node it was placed on is drained before it made the branch: the name
	// goes where it is placed now.
	if err := r.cat.SetDraining(ctx, placed.node, true); err != nil {
		t.Fatal(err)
	}
	if next, err := placed.Reroute(ctx); err != nil || next == nil || next.(*lease).addr != other {
		t.Fatalf("reroute of a name whose node was drained: %+v %v, want %s", next, err, other)
	}
	if err := r.cat.SetDraining(ctx, placed.node, false); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[other].InsertBranch(ctx, catalog.Branch{Source: "app", Name: "x", State: catalog.Creating}, "test"); err != nil {
		t.Fatal(err)
	}
	next, err := placed.Reroute(ctx)
	if err != nil || next == nil || next.(*lease).addr != other {
		t.Fatalf("reroute to the winner %s: %+v %v", other, next, err)
	}
	if again, err := next.(*lease).Reroute(ctx); again != nil || err != nil {
		t.Fatalf("a lease of a branch with a row rerouted: %+v %v", again, err)
	}
}

package front

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/errs"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
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

// TestLostWhileWaiting: a client that waits for an away node which the janitor
// then declares dead is told the branch is lost, and an ephemeral one gets it
// made again on a live node, as if it had come after the janitor.
func TestLostWhileWaiting(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	away := r.node("away", "10.0.0.5:1", time.Hour, 0)
	for _, name := range []string{"eph", "plain"} {
		if _, err := away.InsertBranch(ctx, catalog.Branch{Source: "app", Name: name, State: catalog.Running}, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if err := away.Heartbeat(ctx, "10.0.0.5:1", "", -time.Second, catalog.Load{}); err != nil {
		t.Fatal(err)
	}
	r.node("live", "10.0.0.9:1", time.Hour, 0)
	b := New(r.cat, nil)
	b.ownerWait = 10 * time.Second
	go func() {
		time.Sleep(300 * time.Millisecond)
		r.cat.Janitor(ctx, 0)
	}()
	rt := route(t, "app@eph")
	rt.Options.Ephemeral = true
	l, err := b.Acquire(ctx, rt)
	if nl, ok := l.(*noticeLease); err != nil || !ok || nl.addr != "10.0.0.9:1" {
		t.Fatalf("an ephemeral branch lost while its client waited: %#v %v", l, err)
	}
	_, err = b.Acquire(ctx, route(t, "app@plain"))
	if !errors.Is(err, errs.ErrLost) {
		t.Fatalf("a branch lost while its client waited: %v", err)
	}
}

// TestNoNodeHint: a front that finds no node for a new name says why: none
// registered, all draining, or none with a running lease.
func TestNoNodeHint(t *testing.T) {
	hint := func(nodes []catalog.Node) string {
		var ce *proxy.ClientError
		if err := noNodeError(nodes); !errors.As(err, &ce) || ce.Code != "57P03" {
			t.Fatalf("noNodeError = %v", err)
		}
		return ce.Hint
	}
	for _, c := range []struct {
		nodes []catalog.Node
		want  string
	}{
		{nil, "start a pgbranchproxy node"},
		{[]catalog.Node{{State: catalog.NodeDead, LeaseAge: time.Hour}}, "start a pgbranchproxy node"},
		{[]catalog.Node{{State: catalog.NodeDraining, LeaseAge: -time.Second}}, "draining"},
		{[]catalog.Node{{State: catalog.NodeActive, LeaseAge: time.Second}}, "renewed its lease"},
	} {
		if got := hint(c.nodes); !strings.Contains(got, c.want) {
			t.Errorf("nodes %+v: hint %q, want %q in it", c.nodes, got, c.want)
		}
	}
}

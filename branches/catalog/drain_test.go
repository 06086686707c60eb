package catalog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestNodeDrain: a draining node records no new branch (ErrDraining, not
// ErrFenced: the node keeps its branches) while its heartbeats go on; it stays
// draining across a new registration, and across being declared dead, and takes
// new branches again once resumed. Draining a node the catalog does not know is
// ErrNotFound; asking twice is not an error.
func TestNodeDrain(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, dsn := bk.open(t)
		addSources(t, c, "s")
		n := openAgain(t, dsn)
		if _, err := n.Register(ctx, "n1", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		state := func() catalog.NodeState {
			t.Helper()
			ns, err := c.Nodes(ctx)
			if err != nil || len(ns) != 1 {
				t.Fatalf("nodes %v %v", ns, err)
			}
			return ns[0].State
		}
		for range 2 {
			if err := c.SetDraining(ctx, "n1", true); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.Heartbeat(ctx, "a:1", "", time.Hour, catalog.Load{}); err != nil || !n.Draining() || state() != catalog.NodeDraining {
			t.Fatalf("heartbeat of a draining node: %v, draining %v, state %s", err, n.Draining(), state())
		}
		_, err := n.InsertBranch(ctx, catalog.Branch{Source: "s", Name: "new", State: catalog.Creating}, "test")
		if !errors.Is(err, catalog.ErrDraining) || errors.Is(err, catalog.ErrFenced) {
			t.Fatalf("a new branch on a draining node: %v", err)
		}
		again := openAgain(t, dsn)
		reg, err := again.Register(ctx, "n1", "", time.Hour)
		if err != nil || reg.State != catalog.NodeDraining || !again.Draining() {
			t.Fatalf("registered again: %+v %v, draining %v", reg, err, again.Draining())
		}
		if err := c.SetDraining(ctx, "n1", false); err != nil || state() != catalog.NodeActive {
			t.Fatalf("resume: %v, state %s", err, state())
		}
		if err := again.Heartbeat(ctx, "a:1", "", time.Hour, catalog.Load{}); err != nil || again.Draining() {
			t.Fatalf("heartbeat after resume: %v, draining %v", err, again.Draining())
		}
		if _, err := again.InsertBranch(ctx, catalog.Branch{Source: "s", Name: "new", State: catalog.Creating}, "test"); err != nil {
			t.Fatalf("a new branch once resumed: %v", err)
		}
		if err := c.SetDraining(ctx, "nobody", true); !errors.Is(err, catalog.ErrNotFound) {
			t.Fatalf("draining an unknown node: %v", err)
		}

		// Drained, declared dead, back: still drained.
		gone := openAgain(t, dsn)
		if _, err := gone.Register(ctx, "n2", "", -time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := c.SetDraining(ctx, "n2", true); err != nil {
			t.Fatal(err)
		}
		catalog.TestSetAnswering(c, 2*time.Minute)
		if sw, err := c.Janitor(ctx, time.Minute); err != nil || len(sw.Dead) != 1 {
			t.Fatalf("janitor: %+v %v", sw, err)
		}
		back := openAgain(t, dsn)
		if reg, err := back.Register(ctx, "n2", "", time.Hour); err != nil || reg.State != catalog.NodeDraining || !back.Draining() {
			t.Fatalf("a drained node back from the dead: %+v %v, draining %v", reg, err, back.Draining())
		}
	})
}

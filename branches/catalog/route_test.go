package catalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestRouteOf: a front reads a branch's row and its owner node in one call; a
// free name is no error, a branch of a node whose lease ran out is not live, and
// a branch of no node has no address.
func TestRouteOf(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, dsn := bk.open(t)
		addSources(t, c, "a")
		if _, err := c.InsertBranch(ctx, catalog.Branch{Source: "a", Name: "orphan", State: catalog.Stopped}, "test"); err != nil {
			t.Fatal(err)
		}
		r, err := c.RouteOf(ctx, "a", "orphan")
		if err != nil || r.Branch.ID == 0 || r.NodeID != "" || r.NodeAddr != "" || r.NodeLive {
			t.Fatalf("branch of no node: %+v, %v", r, err)
		}
		if _, err := c.Register(ctx, "n1", "10.0.0.1:6432", time.Hour); err != nil {
			t.Fatal(err)
		}
		if _, err := c.InsertBranch(ctx, catalog.Branch{Source: "a", Name: "x", State: catalog.Running, Roles: "r"}, "test"); err != nil {
			t.Fatal(err)
		}
		r, err = c.RouteOf(ctx, "a", "x")
		if err != nil {
			t.Fatal(err)
		}
		if r.Branch.Name != "x" || r.Branch.Roles != "r" || r.NodeID != "n1" || r.NodeAddr != "10.0.0.1:6432" ||
			r.NodeState != catalog.NodeActive || !r.NodeLive {
			t.Fatalf("route: %+v", r)
		}
		if r, err = c.RouteOf(ctx, "a", "free"); err != nil || r.Branch.ID != 0 {
			t.Fatalf("free name: %+v, %v", r, err)
		}
		// Another handle registers n2 with a lease that has run out.
		other := openAgain(t, dsn)
		if _, err := other.Register(ctx, "n2", "10.0.0.2:6432", -time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := other.InsertBranch(ctx, catalog.Branch{Source: "a", Name: "y", State: catalog.Running}, "test"); err != nil {
			t.Fatal(err)
		}
		if r, err = c.RouteOf(ctx, "a", "y"); err != nil || r.NodeID != "n2" || r.NodeLive {
			t.Fatalf("node past its lease: %+v, %v", r, err)
		}
	})
}

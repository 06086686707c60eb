package catalog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestSeedNode: a seed records the node that built it (its directory is on that
// node's disk); one added by a process that did not register records none.
func TestSeedNode(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, dsn := bk.open(t)
		if err := c.AddSource(ctx, catalog.Source{Name: "s", Kind: "empty"}); err != nil {
			t.Fatal(err)
		}
		tool, err := c.AddSeed(ctx, catalog.Seed{Source: "s"})
		if err != nil || tool.NodeID != "" {
			t.Fatalf("a seed of no node: %+v %v", tool, err)
		}
		n := openAgain(t, dsn)
		if _, err := n.Register(ctx, "n1", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		built, err := n.AddSeed(ctx, catalog.Seed{Source: "s"})
		if err != nil || built.NodeID != "n1" {
			t.Fatalf("a node's seed: %+v %v", built, err)
		}
		seeds, err := c.Seeds(ctx)
		if err != nil || len(seeds) != 2 || seeds[0].NodeID != "" || seeds[1].NodeID != "n1" {
			t.Fatalf("seeds read back: %+v %v", seeds, err)
		}
	})
}

// TestDeleteSourceOfOthers: a node cannot remove a source while another node has
// branches of it (their seed rows would go), and can once they are gone.
func TestDeleteSourceOfOthers(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, dsn := bk.open(t)
		if err := c.AddSource(ctx, catalog.Source{Name: "s", Kind: "empty"}); err != nil {
			t.Fatal(err)
		}
		other := openAgain(t, dsn)
		if _, err := other.Register(ctx, "other", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		b := catalog.Branch{Source: "s", Name: "theirs", State: catalog.Running}
		id, err := other.InsertBranch(ctx, b, "test")
		if err != nil {
			t.Fatal(err)
		}
		b.ID = id
		me := openAgain(t, dsn)
		if _, err := me.Register(ctx, "me", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := me.DeleteSource(ctx, "s"); !errors.Is(err, catalog.ErrSourceHasBranches) {
			t.Fatalf("delete under another node's branch: %v, want ErrSourceHasBranches", err)
		}
		if err := other.DeleteBranch(ctx, b, "test"); err != nil {
			t.Fatal(err)
		}
		if err := me.DeleteSource(ctx, "s"); err != nil {
			t.Fatalf("delete once it is gone: %v", err)
		}
	})
}

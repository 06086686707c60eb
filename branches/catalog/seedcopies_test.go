package catalog_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestSeedCopies: a seed is held by its builder and by the nodes that recorded a
// copy; a copy of a removed seed is refused, recording one twice is not an
// error, and removing the source forgets its copies.
func TestSeedCopies(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, dsn := bk.open(t)
		if err := c.AddSource(ctx, catalog.Source{Name: "s", Kind: "empty"}); err != nil {
			t.Fatal(err)
		}
		builder, other := openAgain(t, dsn), openAgain(t, dsn)
		for id, n := range map[string]*catalog.Catalog{"b": builder, "o": other} {
			if _, err := n.Register(ctx, id, "", time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		sd, err := builder.AddSeed(ctx, catalog.Seed{Source: "s"})
		if err != nil {
			t.Fatal(err)
		}
		sd.Manifest = "abc"
		if err := builder.UpdateSeed(ctx, sd); err != nil {
			t.Fatal(err)
		}
		holders := func(want ...string) {
			t.Helper()
			got, err := c.SeedHolders(ctx, sd.ID)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("holders %v %v, want %v", got, err, want)
			}
		}
		holders("b")
		for range 2 {
			if err := other.AddSeedCopy(ctx, sd.ID); err != nil {
				t.Fatal(err)
			}
		}
		holders("b", "o")
		if ids, err := other.SeedCopies(ctx); err != nil || !slices.Equal(ids, []int64{sd.ID}) {
			t.Fatalf("copies %v %v", ids, err)
		}
		if seeds, err := c.Seeds(ctx); err != nil || seeds[0].Manifest != "abc" {
			t.Fatalf("manifest read back: %+v %v", seeds, err)
		}
		if err := other.AddSeedCopy(ctx, sd.ID+100); !errors.Is(err, catalog.ErrNotFound) {
			t.Fatalf("a copy of no seed: %v", err)
		}
		if err := c.AddSeedCopy(ctx, sd.ID); err == nil {
			t.Fatal("a process that is no node recorded a copy")
		}
		if err := other.DeleteSeedCopy(ctx, sd.ID); err != nil {
			t.Fatal(err)
		}
		holders("b")
		if err := other.AddSeedCopy(ctx, sd.ID); err != nil {
			t.Fatal(err)
		}
		if err := builder.DeleteSource(ctx, "s"); err != nil {
			t.Fatal(err)
		}
		holders()
		if ids, err := other.SeedCopies(ctx); err != nil || len(ids) != 0 {
			t.Fatalf("copies of a removed source: %v %v", ids, err)
		}
	})
}

package branches

import (
	"context"
	"errors"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestCreateOfRemovedSource: a branch whose source was removed from the catalog
// (by another node) while this node still knew it is refused as of an unknown
// source (ErrNotFound, which a client gets as 3D000), recorded nowhere, and its
// name is free again.
func TestCreateOfRemovedSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "")
	m.sources["s"] = &sourceState{src: catalog.Source{Name: "s"}}
	if err := m.cat.DeleteSource(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	k := key{"s", "x"}
	b := &branch{rec: catalog.Branch{Source: "s", Name: "x", SeedID: 1, State: catalog.Creating}}
	m.branches[k] = b
	err := m.create(ctx, b, "first connection")
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, catalog.ErrNoSource) {
		t.Fatalf("create of a removed source's branch = %v, want ErrNotFound", err)
	}
	if m.branches[k] != nil {
		t.Fatal("the refused branch is still known")
	}
	if all, err := m.cat.Branches(ctx); err != nil || len(all) != 0 {
		t.Fatalf("branches recorded: %+v, %v", all, err)
	}
}

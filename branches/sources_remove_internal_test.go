package branches

import (
	"context"
	"errors"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// A source whose catalog rows could not be deleted stays this server's: its
// branches can still be created and its pool refilled.
func TestRemoveSourceKeptWhenCatalogRefuses(t *testing.T) {
	t.Parallel()
	m := newUnitManager(t, "")
	m.sources["s"] = &sourceState{src: catalog.Source{Name: "s"}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the catalog's delete fails
	if err := m.RemoveSource(ctx, "s"); err == nil {
		t.Fatal("RemoveSource with a failing catalog succeeded")
	}
	if m.sources["s"] == nil {
		t.Fatal("the source is gone from the server while the catalog still has it")
	}
	if err := m.RemoveSource(context.Background(), "s"); err != nil {
		t.Fatalf("RemoveSource again: %v", err)
	}
	if m.sources["s"] != nil {
		t.Fatal("the removed source is still known")
	}
	if srcs, err := m.cat.Sources(context.Background()); err != nil || len(srcs) != 0 {
		t.Fatalf("catalog sources after removal: %+v, %v", srcs, err)
	}
}

// A source with a branch is refused, and one another node removed from the
// catalog already is removed here too.
func TestRemoveSourceRefusedOrGone(t *testing.T) {
	t.Parallel()
	m := newUnitManager(t, "")
	m.sources["s"] = &sourceState{src: catalog.Source{Name: "s"}}
	m.branches[key{"s", "x"}] = &branch{rec: catalog.Branch{Source: "s", Name: "x"}}
	if err := m.RemoveSource(context.Background(), "s"); !errors.Is(err, ErrBusy) {
		t.Fatalf("RemoveSource of a source with a branch = %v, want ErrBusy", err)
	}
	delete(m.branches, key{"s", "x"})
	if err := m.cat.DeleteSource(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	if err := m.RemoveSource(context.Background(), "s"); err != nil || m.sources["s"] != nil {
		t.Fatalf("RemoveSource of a source the catalog no longer has = %v (known %v), want it removed", err, m.sources["s"] != nil)
	}
}

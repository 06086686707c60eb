package branches

import (
	"context"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// A warm setting made on another node (source set --warm through a front, which
// passes it to one node) reaches this one at its next sync, with no new seed.
func TestSyncSourcesWarm(t *testing.T) {
	ctx := context.Background()
	m := newUnitManager(t, "")
	seeds, err := m.cat.Seeds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sd := catalog.NewestSeeds(seeds)["s"]
	m.sources["s"] = &sourceState{src: catalog.Source{Name: "s", Kind: "empty", Warm: -1}, seed: &sd}
	if err := m.cat.SetSourceWarm(ctx, "s", 5); err != nil {
		t.Fatal(err)
	}
	if err := m.syncSources(ctx); err != nil {
		t.Fatal(err)
	}
	if got := m.sources["s"].src.Warm; got != 5 {
		t.Errorf("warm setting after a sync: %d, want 5 (set on another node)", got)
	}
}

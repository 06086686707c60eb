package branches

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// A branch made from another records its parent's seed generation; a row from
// before that, which records the source's newest, is set to the generation its
// layers stand on when serve starts. A branch of the seed and a flattened fork
// (its lowest layer a copy of its own) keep theirs.
func TestReconcileRepairsForkSeedID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "")
	seeds, err := m.cat.Seeds(ctx)
	if err != nil || len(seeds) != 1 {
		t.Fatalf("Seeds = %v, %v", seeds, err)
	}
	g1 := seeds[0]
	g2, err := m.cat.AddSeed(ctx, catalog.Seed{Source: "s", Generation: 2, Dir: filepath.Join(m.cfg.StateDir, "seeds", "s", "2")})
	if err != nil {
		t.Fatal(err)
	}
	g2.State = catalog.SeedReady
	if err := m.cat.UpdateSeed(ctx, g2); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC()
	layer := filepath.Join(m.cfg.StateDir, "layers", "b1")
	rows := map[string]catalog.Branch{
		"kid":  {Source: "s", Name: "kid", Parent: "old", SeedID: g2.ID, Layers: []string{layer, g1.Dir}},
		"old":  {Source: "s", Name: "old", SeedID: g1.ID, Layers: []string{g1.Dir}},
		"flat": {Source: "s", Name: "flat", Parent: "old", SeedID: g2.ID, Layers: []string{layer}},
	}
	want := map[string]int64{"kid": g1.ID, "old": g1.ID, "flat": g2.ID}
	for name, b := range rows {
		b.State, b.CreatedAt, b.StateAt = catalog.Stopped, t0, t0
		if _, err := m.cat.InsertBranch(ctx, b, "test"); err != nil {
			t.Fatal(name, err)
		}
	}
	if err := m.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := m.cat.Branches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range got {
		if b.SeedID != want[b.Name] {
			t.Errorf("branch %s: seed %d, want %d", b.Name, b.SeedID, want[b.Name])
		}
		if mb := m.branches[key{"s", b.Name}]; mb == nil || mb.rec.SeedID != want[b.Name] {
			t.Errorf("branch %s in memory: %+v, want seed %d", b.Name, mb, want[b.Name])
		}
	}
}

package branches

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// reconcile repairs this node's rows and loads lost ones; another node's rows
// sharing the catalog are neither changed nor loaded, and directories named by
// their ids are not its to roll back. Lost rows, whichever node had them, are
// loaded so that they are refused as lost and can be destroyed.
func TestReconcileOwnRowsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "")
	if _, err := m.cat.Register(ctx, "n1", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC()
	mine := catalog.Branch{Source: "s", Name: "mine", SeedID: 1, State: catalog.Running, CreatedAt: t0, StateAt: t0}
	var err error
	if mine.ID, err = m.cat.InsertBranch(ctx, mine, "test"); err != nil {
		t.Fatal(err)
	}
	other, err := catalog.Open(filepath.Join(m.cfg.StateDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Register(ctx, "n2", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	theirs := catalog.Branch{Source: "s", Name: "theirs", SeedID: 1, State: catalog.Running, CreatedAt: t0, StateAt: t0}
	if theirs.ID, err = other.InsertBranch(ctx, theirs, "test"); err != nil {
		t.Fatal(err)
	}
	half := catalog.Branch{Source: "s", Name: "half", SeedID: 1, State: catalog.Creating, CreatedAt: t0, StateAt: t0}
	if half.ID, err = other.InsertBranch(ctx, half, "test"); err != nil {
		t.Fatal(err)
	}
	dead, err := catalog.Open(filepath.Join(m.cfg.StateDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	if _, err := dead.Register(ctx, "n3", "", -time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := dead.InsertBranch(ctx, catalog.Branch{Source: "s", Name: "gone", SeedID: 1, State: catalog.Stopped, CreatedAt: t0, StateAt: t0}, "test"); err != nil {
		t.Fatal(err)
	}
	if s, err := other.Janitor(ctx, time.Nanosecond); err != nil || s.Lost != 1 {
		t.Fatalf("Janitor = %+v, %v, want n3's branch lost", s, err)
	}
	if err := m.reconcile(ctx); err != nil {
		t.Fatalf("reconcile with another node's rows: %v", err)
	}
	rows := map[string]catalog.Branch{}
	all, err := m.cat.Branches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		rows[r.Name] = r
	}
	if r := rows["mine"]; r.State != catalog.Stopped {
		t.Fatalf("this node's running row is %s after reconcile, want stopped", r.State)
	}
	if r, ok := rows["theirs"]; !ok || r.State != catalog.Running || r.NodeID != "n2" {
		t.Fatalf("another node's running row = %+v, %v; want it untouched", r, ok)
	}
	if r, ok := rows["half"]; !ok || r.State != catalog.Creating {
		t.Fatalf("another node's creating row = %+v, %v; want it untouched", r, ok)
	}
	if _, ok := m.branches[key{"s", "theirs"}]; ok {
		t.Fatal("reconcile loaded another node's branch")
	}
	if b, ok := m.branches[key{"s", "gone"}]; !ok || b.rec.State != catalog.Lost {
		t.Fatal("reconcile did not load a lost branch of another node, to refuse and destroy it")
	}
	if _, ok := m.branches[key{"s", "mine"}]; !ok {
		t.Fatal("reconcile did not load this node's branch")
	}
}

// On a node of several, reconcile removes a source whose first seed this node
// was building when it stopped (its `source add` was interrupted), and keeps one
// whose first seed another node builds, and one with no seed row yet.
func TestReconcileInterruptedSourceAdd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "")
	other := joinAsN1(t, m)
	for _, src := range []string{"mine", "theirs", "unseeded"} {
		if err := m.cat.AddSource(ctx, catalog.Source{Name: src, Kind: "empty"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.cat.AddSeed(ctx, catalog.Seed{Source: "mine"}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.AddSeed(ctx, catalog.Seed{Source: "theirs"}); err != nil {
		t.Fatal(err)
	}
	if err := m.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	srcs, err := m.cat.Sources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range srcs {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"s", "theirs", "unseeded"}) {
		t.Fatalf("sources after reconcile: %v, want s, theirs and unseeded", names)
	}
}

package branches

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestSourcesCountEveryNode: on a node of several, source ls counts the
// branches of every node, not only this node's (a front passes source ls to any
// node, so its count depended on which one answered); pool members are not
// branches.
func TestSourcesCountEveryNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "")
	other := joinAsN1(t, m)
	t0 := time.Now().UTC()
	for _, b := range []struct {
		cat    *catalog.Catalog
		name   string
		pooled bool
	}{{m.cat, "mine", false}, {other, "theirs", false}, {other, "theirs-too", false}, {other, "pool-1", true}} {
		row := catalog.Branch{Source: "s", Name: b.name, SeedID: 1, State: catalog.Stopped, Pooled: b.pooled, CreatedAt: t0, StateAt: t0}
		if _, err := b.cat.InsertBranch(ctx, row, "test"); err != nil {
			t.Fatal(err)
		}
	}
	seeds, err := m.cat.Seeds(ctx)
	if err != nil || len(seeds) != 1 {
		t.Fatalf("seeds: %v %v", seeds, err)
	}
	m.sources["s"] = &sourceState{src: catalog.Source{Name: "s", Kind: "empty"}, seed: &seeds[0]}
	m.branches[key{"s", "mine"}] = &branch{rec: catalog.Branch{Source: "s", Name: "mine"}}
	got := m.Sources()
	if len(got) != 1 || got[0].Branches != 3 {
		t.Fatalf("Sources() = %+v, want source s with 3 branches (1 here, 2 on n2, the pool member not counted)", got)
	}
}

// TestElsewhere: on a node of several, a branch command for a branch of
// another node says which node has it, rather than that the branch does not
// exist; one that no node has is not found, as before.
func TestElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "")
	other := joinAsN1(t, m)
	t0 := time.Now().UTC()
	if _, err := other.InsertBranch(ctx, catalog.Branch{Source: "s", Name: "theirs", SeedID: 1, State: catalog.Stopped, CreatedAt: t0, StateAt: t0}, "test"); err != nil {
		t.Fatal(err)
	}
	for what, op := range map[string]func() error{
		"destroy":          func() error { return m.Destroy(ctx, "", "theirs", OpOptions{}) },
		"reset --source s": func() error { return m.Reset(ctx, "s", "theirs", OpOptions{}) },
		"set":              func() error { return m.Set(ctx, "", "theirs", Settings{}) },
	} {
		err := op()
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "it is on node n2") {
			t.Errorf("%s of another node's branch: %v, want not found naming node n2", what, err)
		}
	}
	if err := m.Destroy(ctx, "", "nowhere", OpOptions{}); !errors.Is(err, ErrNotFound) || strings.Contains(err.Error(), "node") {
		t.Errorf("destroy of a branch no node has: %v, want not found", err)
	}
}

// TestRemoveSourceInUse: a source with branches is not removed, a conflict
// (ErrBusy, 409) that says so in its own words: it said "branch has open
// sessions" when none had one. On a node of several it counts the branches
// here and on the other nodes.
func TestRemoveSourceInUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "")
	seeds, err := m.cat.Seeds(ctx)
	if err != nil || len(seeds) != 1 {
		t.Fatalf("seeds: %v %v", seeds, err)
	}
	m.sources["s"] = &sourceState{src: catalog.Source{Name: "s", Kind: "empty"}, seed: &seeds[0]}
	m.branches[key{"s", "mine"}] = &branch{rec: catalog.Branch{Source: "s", Name: "mine"}}
	err = m.RemoveSource(ctx, "s")
	if !errors.Is(err, ErrBusy) || err.Error() != `source "s" has 1 branches: destroy them first` {
		t.Fatalf("RemoveSource with a branch: %v, want a conflict saying the source has a branch", err)
	}
	other := joinAsN1(t, m)
	t0 := time.Now().UTC()
	if _, err := other.InsertBranch(ctx, catalog.Branch{Source: "s", Name: "theirs", SeedID: 1, State: catalog.Stopped, CreatedAt: t0, StateAt: t0}, "test"); err != nil {
		t.Fatal(err)
	}
	err = m.RemoveSource(ctx, "s")
	if !errors.Is(err, ErrBusy) || strings.Contains(err.Error(), "sessions") || !strings.Contains(err.Error(), "1 branches on this node and 1 on other nodes") {
		t.Fatalf("RemoveSource with branches here and on n2: %v", err)
	}
}

// TestDiffAgainstElsewhere: branch diff --against a branch of another node
// (a front passes the diff to the first branch's node) says that the two must
// be on one node, rather than that the branch does not exist.
func TestDiffAgainstElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "")
	other := joinAsN1(t, m)
	t0 := time.Now().UTC()
	if _, err := other.InsertBranch(ctx, catalog.Branch{Source: "s", Name: "theirs", SeedID: 1, State: catalog.Stopped, CreatedAt: t0, StateAt: t0}, "test"); err != nil {
		t.Fatal(err)
	}
	m.branches[key{"s", "mine"}] = &branch{rec: catalog.Branch{Source: "s", Name: "mine"}}
	_, err := m.Diff(ctx, "mine", DiffOptions{Against: "theirs"})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "it is on node n2, and branch diff --against compares two branches of one node") {
		t.Fatalf("diff --against another node's branch: %v", err)
	}
}

// TestSourcesListsOtherNodesSources: on a node of several, source ls lists a
// source another node added just now, not from the next reaper pass on: a
// front passes source ls to any node.
func TestSourcesListsOtherNodesSources(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "")
	m.cfg.Join = true
	if _, err := m.cat.Register(ctx, "n1", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := m.cat.AddSource(ctx, catalog.Source{Name: "crm", Kind: "sql"}); err != nil {
		t.Fatal(err)
	}
	sd, err := m.cat.AddSeed(ctx, catalog.Seed{Source: "crm", Dir: filepath.Join(m.cfg.StateDir, "seeds", "crm", "1")})
	if err != nil {
		t.Fatal(err)
	}
	sd.State = catalog.SeedReady
	if err := m.cat.UpdateSeed(ctx, sd); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range m.Sources() {
		names = append(names, s.Name)
	}
	if !slices.Contains(names, "crm") {
		t.Fatalf("Sources() = %v, want crm, added by another node", names)
	}
}

// TestRemoveSourceNotBroughtBack: on a node of several, a listing (which reads
// the catalog's sources) while source rm destroys the source's pool members
// does not bring the source back: it stayed this node's, with a refill to make
// pool members of it, after source rm had succeeded.
func TestRemoveSourceNotBroughtBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "unmount=sleep(300ms)")
	m.cfg.Join = true
	if _, err := m.cat.Register(ctx, "n1", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := m.syncSources(ctx); err != nil || m.sources["s"] == nil {
		t.Fatalf("sync: %v, sources %v", err, m.sources)
	}
	t0 := time.Now().UTC()
	rec := catalog.Branch{Source: "s", Name: "pool-1", SeedID: 1, State: catalog.Stopped, Pooled: true, CreatedAt: t0, StateAt: t0}
	id, err := m.cat.InsertBranch(ctx, rec, "test")
	if err != nil {
		t.Fatal(err)
	}
	rec.ID = id
	rec.NodeID, rec.NodeEpoch, _ = m.cat.Registration()
	m.branches[key{"s", "pool-1"}] = &branch{rec: rec}
	done := make(chan error, 1)
	go func() { done <- m.RemoveSource(ctx, "s") }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		m.mu.Lock()
		gone := m.sources["s"] == nil
		m.mu.Unlock()
		if gone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("RemoveSource did not take the source away")
		}
	}
	m.Sources() // while the pool member's destroy sleeps
	if err := <-done; err != nil {
		t.Fatalf("RemoveSource: %v", err)
	}
	m.mu.Lock()
	back := m.sources["s"] != nil
	m.mu.Unlock()
	if back {
		t.Fatal("source s is this node's again after source rm succeeded")
	}
}

package catalog_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// at is a fixed instant with sub-second precision, so a lossy time round trip shows.
func at(min int) time.Time {
	return time.Date(2026, 3, 14, 15, min, 26, 535897932, time.UTC)
}

func TestOpenCreatesPrivateFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string)
	}{
		{"new file", func(*testing.T, string) {}},
		{"existing world-readable file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "catalog.db")
			tc.prepare(t, path)
			c, err := catalog.Open(path)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer c.Close()
			// Write something so the WAL file exists too.
			if err := c.AddSource(context.Background(), catalog.Source{Name: "s", Kind: "empty"}); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{path, path + "-wal"} {
				st, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if got := st.Mode().Perm(); got != 0o600 {
					t.Errorf("%s mode = %v, want 0600", filepath.Base(p), got)
				}
			}
		})
	}
}

func TestOpenBadPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct{ name, dsn string }{
		{"missing directory", filepath.Join(dir, "no-such-dir", "catalog.db")},
		{"other scheme", "mysql://u:secret@db/catalog"},
		{"libpq keywords", "host=db dbname=catalog password=secret"},
	}
	for _, tc := range tests {
		c, err := catalog.Open(tc.dsn)
		if err == nil {
			c.Close()
			t.Errorf("%s: Open(%q) succeeded", tc.name, tc.dsn)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows the password: %v", tc.name, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused Open left files: %v", entries)
	}
}

func TestSources(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		b := catalog.Source{Name: "b", Kind: "sql", Spec: "/data/b.sql", DefaultDatabase: "app", CreatedAt: at(1)}
		a := catalog.Source{Name: "a", Kind: "empty", CreatedAt: at(2)}
		for _, s := range []catalog.Source{b, a} {
			if err := c.AddSource(ctx, s); err != nil {
				t.Fatalf("AddSource(%s): %v", s.Name, err)
			}
		}
		err := c.AddSource(ctx, catalog.Source{Name: "b", Kind: "empty"})
		if !errors.Is(err, catalog.ErrExists) {
			t.Fatalf("second AddSource(b) = %v, want ErrExists", err)
		}
		got, err := c.Sources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []catalog.Source{a, b}
		if !slices.EqualFunc(got, want, sourceEqual) {
			t.Fatalf("Sources = %+v, want %+v", got, want)
		}
		if err := c.DeleteSource(ctx, "nope"); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("DeleteSource(missing) = %v, want ErrNotFound", err)
		}
	})
}

func sourceEqual(x, y catalog.Source) bool {
	return x.Name == y.Name && x.Kind == y.Kind && x.Spec == y.Spec && x.DefaultDatabase == y.DefaultDatabase &&
		x.CreatedAt.Equal(y.CreatedAt)
}

func TestSeeds(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		for _, s := range []string{"a", "b"} {
			if err := c.AddSource(ctx, catalog.Source{Name: s, Kind: "empty"}); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			source  string
			wantGen int
		}{
			{"a", 1},
			{"a", 2},
			{"b", 1},
			{"a", 3},
			{"b", 2},
		}
		var added []catalog.Seed
		for i, tc := range tests {
			s, err := c.AddSeed(ctx, catalog.Seed{Source: tc.source, Dir: "/seeds/" + tc.source, CreatedAt: at(i)})
			if err != nil {
				t.Fatalf("AddSeed(%s) #%d: %v", tc.source, i, err)
			}
			if s.Generation != tc.wantGen || s.State != catalog.SeedBuilding || s.ID == 0 {
				t.Errorf("AddSeed(%s) #%d = gen %d state %q id %d, want gen %d state building and an id",
					tc.source, i, s.Generation, s.State, s.ID, tc.wantGen)
			}
			added = append(added, s)
		}

		ready := added[1]
		ready.State = catalog.SeedReady
		ready.Dir = "/seeds/a/2"
		ready.PGVersion = "15"
		ready.Databases = []string{"app", "postgres", "template1"}
		ready.Superuser = "postgres"
		ready.Roles = `{"app":{"name":"app","password":"SCRAM-SHA-256$4096:x","can_login":true}}`
		ready.ReadyAt = at(30)
		if err := c.UpdateSeed(ctx, ready); err != nil {
			t.Fatal(err)
		}
		got, err := c.Seeds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(added) {
			t.Fatalf("Seeds returned %d, want %d", len(got), len(added))
		}
		for i, want := range added {
			if i == 1 {
				want = ready
			}
			if !seedEqual(got[i], want) {
				t.Errorf("Seeds[%d] = %+v, want %+v", i, got[i], want)
			}
		}

		if err := c.DeleteSeed(ctx, added[0].ID); err != nil {
			t.Fatal(err)
		}
		if err := c.DeleteSource(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		got, err = c.Seeds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range got {
			if s.Source == "a" {
				t.Errorf("seed %+v of deleted source a is left", s)
			}
		}
		if len(got) != 2 {
			t.Errorf("after DeleteSource(a) %d seeds left, want b's 2", len(got))
		}
		srcs, err := c.Sources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(srcs) != 1 || srcs[0].Name != "b" {
			t.Errorf("Sources after DeleteSource(a) = %+v, want only b", srcs)
		}
	})
}

func seedEqual(x, y catalog.Seed) bool {
	return x.ID == y.ID && x.Source == y.Source && x.Generation == y.Generation && x.State == y.State &&
		x.Dir == y.Dir && x.PGVersion == y.PGVersion && slices.Equal(x.Databases, y.Databases) &&
		x.Superuser == y.Superuser && x.Roles == y.Roles && x.CreatedAt.Equal(y.CreatedAt) && x.ReadyAt.Equal(y.ReadyAt)
}

func branchEqual(x, y catalog.Branch) bool {
	return x.ID == y.ID && x.Source == y.Source && x.Name == y.Name && x.SeedID == y.SeedID && x.Parent == y.Parent &&
		slices.Equal(x.Layers, y.Layers) && x.State == y.State && x.CowMode == y.CowMode && x.PID == y.PID &&
		x.TTL == y.TTL && x.Ephemeral == y.Ephemeral && x.Quota == y.Quota && x.Roles == y.Roles &&
		slices.Equal(x.Databases, y.Databases) && x.OwnedBytes == y.OwnedBytes && x.CreateMS == y.CreateMS && x.Error == y.Error &&
		x.CreatedAt.Equal(y.CreatedAt) && x.LastUsedAt.Equal(y.LastUsedAt) && x.StateAt.Equal(y.StateAt)
}

// fullBranch sets every field to a non-zero value.
func fullBranch(source, name string) catalog.Branch {
	return catalog.Branch{
		Source:     source,
		Name:       name,
		SeedID:     7,
		Parent:     "main",
		Layers:     []string{"/state/branches/main/frozen/2", "/state/branches/main/frozen/1", "/state/seeds/a/1"},
		State:      catalog.Creating,
		CowMode:    "lazyrw",
		PID:        4242,
		TTL:        90 * time.Minute,
		Ephemeral:  true,
		Quota:      1 << 30,
		Roles:      `{"u":{"name":"u","can_login":true}}`,
		Databases:  []string{"app", "postgres"},
		OwnedBytes: 123456789,
		CreateMS:   87,
		Error:      "last start failed: no space",
		CreatedAt:  at(1),
		LastUsedAt: at(2),
		StateAt:    at(3),
	}
}

func TestBranchRoundTrip(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		tests := []struct {
			name string
			b    catalog.Branch
		}{
			{"every field set", fullBranch("a", "feature")},
			{"zero values", catalog.Branch{Source: "a", Name: "bare", State: catalog.Stopped}},
			{"single layer", catalog.Branch{Source: "a", Name: "one", Layers: []string{"/seed"}, State: catalog.Running, CreatedAt: at(5)}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				c, _ := bk.open(t)
				addSources(t, c, "a")
				id, err := c.InsertBranch(ctx, tc.b, "test")
				if err != nil {
					t.Fatalf("InsertBranch: %v", err)
				}
				if id == 0 {
					t.Fatal("InsertBranch returned id 0")
				}
				want := tc.b
				want.ID = id
				got, err := c.Branches(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != 1 || !branchEqual(got[0], want) {
					t.Fatalf("Branches = %+v, want [%+v]", got, want)
				}
			})
		}
	})
}

func TestUpdateBranch(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		addSources(t, c, "a")
		b := fullBranch("a", "feature")
		id, err := c.InsertBranch(ctx, b, "create")
		if err != nil {
			t.Fatal(err)
		}
		b.ID = id

		// Every mutable field changes.
		u := b
		u.SeedID = b.SeedID + 1
		u.Parent = ""
		u.Layers = []string{"/state/seeds/a/2"}
		u.State = catalog.Running
		u.CowMode = "eager"
		u.PID = 999
		u.TTL = time.Second
		u.Ephemeral = false
		u.Quota = 0
		u.Roles = ""
		u.Databases = []string{"app"}
		u.OwnedBytes = 1
		u.CreateMS = 12
		u.Error = ""
		u.LastUsedAt = at(20)
		u.StateAt = at(21)
		if err := c.UpdateBranch(ctx, u, "started"); err != nil {
			t.Fatal(err)
		}
		got, err := c.Branches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !branchEqual(got[0], u) {
			t.Fatalf("Branches after update = %+v, want [%+v]", got, u)
		}

		missing := u
		missing.ID = id + 100
		if err := c.UpdateBranch(ctx, missing, "x"); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("UpdateBranch(missing id) = %v, want ErrNotFound", err)
		}
	})
}

func TestInsertBranchDuplicate(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		addSources(t, c, "a", "b")
		tests := []struct {
			source, name string
			wantExists   bool
		}{
			{"a", "x", false},
			{"a", "x", true},
			{"b", "x", false}, // same name, other source
			{"a", "y", false},
			{"b", "x", true},
		}
		for i, tc := range tests {
			_, err := c.InsertBranch(ctx, catalog.Branch{Source: tc.source, Name: tc.name, State: catalog.Creating}, "")
			if tc.wantExists != errors.Is(err, catalog.ErrExists) || (!tc.wantExists && err != nil) {
				t.Errorf("#%d InsertBranch(%s/%s) = %v, want ErrExists %v", i, tc.source, tc.name, err, tc.wantExists)
			}
		}
		got, err := c.Branches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, b := range got {
			names = append(names, b.Source+"/"+b.Name)
		}
		if want := []string{"a/x", "a/y", "b/x"}; !slices.Equal(names, want) {
			t.Errorf("Branches = %v, want %v (by source, name)", names, want)
		}
		// A failed insert logs nothing.
		tr, err := c.Transitions(ctx, "a", "x")
		if err != nil {
			t.Fatal(err)
		}
		if len(tr) != 1 {
			t.Errorf("a/x has %d transitions after a refused duplicate, want 1", len(tr))
		}
	})
}

func TestTransitions(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		addSources(t, c, "a")
		b := catalog.Branch{Source: "a", Name: "f", State: catalog.Creating}
		id, err := c.InsertBranch(ctx, b, "create")
		if err != nil {
			t.Fatal(err)
		}
		b.ID = id
		// Another branch's log must not mix in.
		if _, err := c.InsertBranch(ctx, catalog.Branch{Source: "a", Name: "other", State: catalog.Creating}, "noise"); err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			state  catalog.State
			reason string
		}{
			{catalog.Starting, "first connect"},
			{catalog.Starting, "same state: not logged"},
			{catalog.Running, "ready"},
			{catalog.Running, "touch: not logged"},
			{catalog.Stopping, "idle"},
			{catalog.Stopped, "stopped"},
		}
		for _, s := range steps {
			b.State = s.state
			b.PID++ // a change that is not a state change
			if err := c.UpdateBranch(ctx, b, s.reason); err != nil {
				t.Fatal(err)
			}
		}
		before := time.Now()
		if err := c.DeleteBranch(ctx, b, "destroyed"); err != nil {
			t.Fatal(err)
		}
		got, err := c.Transitions(ctx, "a", "f")
		if err != nil {
			t.Fatal(err)
		}
		type row struct{ from, to, reason string }
		want := []row{
			{"", "creating", "create"},
			{"creating", "starting", "first connect"},
			{"starting", "running", "ready"},
			{"running", "stopping", "idle"},
			{"stopping", "stopped", "stopped"},
			{"stopped", "gone", "destroyed"},
		}
		var rows []row
		for _, tr := range got {
			if tr.Source != "a" || tr.Branch != "f" {
				t.Errorf("transition %+v is not a/f's", tr)
			}
			rows = append(rows, row{tr.From, tr.To, tr.Reason})
		}
		if !slices.Equal(rows, want) {
			t.Fatalf("Transitions =\n%v\nwant\n%v", rows, want)
		}
		if last := got[len(got)-1].At; last.Before(before.Add(-time.Second)) || last.After(time.Now().Add(time.Second)) {
			t.Errorf("gone transition at %v, want about now", last)
		}
		for i := 1; i < len(got); i++ {
			if got[i].At.Before(got[i-1].At) {
				t.Errorf("transition %d at %v is before its predecessor at %v", i, got[i].At, got[i-1].At)
			}
		}
		branches, err := c.Branches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(branches) != 1 || branches[0].Name != "other" {
			t.Errorf("Branches after DeleteBranch(f) = %+v, want only other", branches)
		}
	})
}

func TestTouch(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		addSources(t, c, "a")
		ids := map[string]int64{}
		for _, n := range []string{"x", "y", "z"} {
			id, err := c.InsertBranch(ctx, catalog.Branch{Source: "a", Name: n, State: catalog.Running, LastUsedAt: at(0)}, "")
			if err != nil {
				t.Fatal(err)
			}
			ids[n] = id
		}
		if err := c.Touch(ctx, map[int64]time.Time{ids["x"]: at(10), ids["z"]: at(11), 9999: at(12)}); err != nil {
			t.Fatalf("Touch: %v", err)
		}
		got, err := c.Branches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]time.Time{"x": at(10), "y": at(0), "z": at(11)}
		for _, b := range got {
			if !b.LastUsedAt.Equal(want[b.Name]) {
				t.Errorf("%s LastUsedAt = %v, want %v", b.Name, b.LastUsedAt, want[b.Name])
			}
		}
		tr, err := c.Transitions(ctx, "a", "x")
		if err != nil {
			t.Fatal(err)
		}
		if len(tr) != 1 {
			t.Errorf("Touch logged transitions: %+v", tr)
		}
	})
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		path := bk.newDSN(t)
		c, err := catalog.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		src := catalog.Source{Name: "a", Kind: "url", Spec: "postgres://x", CreatedAt: at(0)}
		if err := c.AddSource(ctx, src); err != nil {
			t.Fatal(err)
		}
		seed, err := c.AddSeed(ctx, catalog.Seed{Source: "a", Dir: "/s", CreatedAt: at(1)})
		if err != nil {
			t.Fatal(err)
		}
		b := fullBranch("a", "f")
		b.SeedID = seed.ID
		if b.ID, err = c.InsertBranch(ctx, b, "create"); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}

		c, err = catalog.Open(path)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer c.Close()
		srcs, err := c.Sources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(srcs) != 1 || !sourceEqual(srcs[0], src) {
			t.Errorf("Sources after reopen = %+v, want [%+v]", srcs, src)
		}
		seeds, err := c.Seeds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(seeds) != 1 || !seedEqual(seeds[0], seed) {
			t.Errorf("Seeds after reopen = %+v, want [%+v]", seeds, seed)
		}
		branches, err := c.Branches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(branches) != 1 || !branchEqual(branches[0], b) {
			t.Errorf("Branches after reopen = %+v, want [%+v]", branches, b)
		}
		tr, err := c.Transitions(ctx, "a", "f")
		if err != nil {
			t.Fatal(err)
		}
		if len(tr) != 1 || tr[0].To != "creating" {
			t.Errorf("Transitions after reopen = %+v", tr)
		}
		// Generations continue after a reopen.
		next, err := c.AddSeed(ctx, catalog.Seed{Source: "a", Dir: "/s2"})
		if err != nil {
			t.Fatal(err)
		}
		if next.Generation != 2 {
			t.Errorf("generation after reopen = %d, want 2", next.Generation)
		}
	})
}

// TestConcurrentUse runs writers and readers at once; with -race it checks that a
// *Catalog is safe for concurrent use as documented.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		addSources(t, c, "a")
		const n = 8
		errc := make(chan error, 2*n)
		for i := range n {
			go func() {
				_, err := c.InsertBranch(ctx, catalog.Branch{Source: "a", Name: string(rune('a' + i)), State: catalog.Creating}, "")
				errc <- err
			}()
			go func() {
				_, err := c.Branches(ctx)
				errc <- err
			}()
		}
		for range 2 * n {
			if err := <-errc; err != nil {
				t.Error(err)
			}
		}
		got, err := c.Branches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Errorf("%d branches, want %d", len(got), n)
		}
	})
}

// TestBind: a catalog is bound to one state directory: the first Bind wins, later
// ones report the id bound before; HasRecords tells an empty catalog from one in use.
func TestBind(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		if id, err := c.StateID(ctx); err != nil || id != "" {
			t.Fatalf("StateID of a new catalog = %q, %v; want none", id, err)
		}
		if has, err := c.HasRecords(ctx); err != nil || has {
			t.Fatalf("HasRecords of a new catalog = %v, %v", has, err)
		}
		if id, err := c.Bind(ctx, "first"); err != nil || id != "first" {
			t.Fatalf("first Bind = %q, %v", id, err)
		}
		if id, err := c.Bind(ctx, "second"); err != nil || id != "first" {
			t.Fatalf("second Bind = %q, %v; want the first id kept", id, err)
		}
		if id, err := c.StateID(ctx); err != nil || id != "first" {
			t.Fatalf("StateID = %q, %v", id, err)
		}
		if err := c.AddSource(ctx, catalog.Source{Name: "a", Kind: "empty"}); err != nil {
			t.Fatal(err)
		}
		if has, err := c.HasRecords(ctx); err != nil || !has {
			t.Fatalf("HasRecords with a source = %v, %v", has, err)
		}
	})
}

// TestPatchServerSettings: changes to different limits of one branch, made at
// once, all land (a read then a write would lose all but one); the settings of an
// older branch of the same name are replaced, not patched.
func TestPatchServerSettings(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		created := time.Unix(100, 0)
		if err := c.SetServerSettings(ctx, "a", "b", created, catalog.ServerSettings{Image: "pg:15"}); err != nil {
			t.Fatal(err)
		}
		mem, cpus, pids := int64(1<<30), 1.5, int64(64)
		patches := []catalog.ServerSettingsPatch{{MemoryBytes: &mem}, {CPUs: &cpus}, {PIDs: &pids}}
		for round := range 20 {
			errs := run(len(patches), func(i int) error {
				return c.PatchServerSettings(ctx, "a", "b", created, patches[i])
			})
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			want := catalog.ServerSettings{Image: "pg:15", MemoryBytes: mem, CPUs: cpus, PIDs: pids}
			if got, err := c.ServerSettingsOf(ctx, "a", "b", created); err != nil || got != want {
				t.Fatalf("round %d: settings after concurrent patches %+v, %v; want %+v", round, got, err, want)
			}
			mem, cpus, pids = mem+1, cpus+1, pids+1
		}
		later := created.Add(time.Hour)
		if err := c.PatchServerSettings(ctx, "a", "b", later, catalog.ServerSettingsPatch{PIDs: &pids}); err != nil {
			t.Fatal(err)
		}
		if got, err := c.ServerSettingsOf(ctx, "a", "b", later); err != nil || got != (catalog.ServerSettings{PIDs: pids}) {
			t.Fatalf("settings of a new branch of the same name: %+v, %v; want only its own pids", got, err)
		}
	})
}

// TestAllServerSettings: the settings read at once are those ServerSettingsOf
// reads one by one, a branch's only for the branch of that creation time.
func TestAllServerSettings(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		created := time.Unix(100, 5)
		src := catalog.ServerSettings{Image: "pg:16", MemoryBytes: 1 << 30, CPUs: 0.5, PIDs: 100}
		br := catalog.ServerSettings{MemoryBytes: 256 << 20}
		if err := c.SetServerSettings(ctx, "a", "", time.Time{}, src); err != nil {
			t.Fatal(err)
		}
		if err := c.SetServerSettings(ctx, "a", "b", created, br); err != nil {
			t.Fatal(err)
		}
		all, err := c.AllServerSettings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			source, branch string
			created        time.Time
			want           catalog.ServerSettings
		}{
			{"a", "", time.Time{}, src},
			{"a", "b", created, br},
			{"a", "b", created.Add(time.Second), catalog.ServerSettings{}}, // a later branch of the name
			{"a", "c", created, catalog.ServerSettings{}},
			{"z", "", time.Time{}, catalog.ServerSettings{}},
		} {
			if got := all.Of(tc.source, tc.branch, tc.created); got != tc.want {
				t.Errorf("Of(%q, %q, %v) = %+v, want %+v", tc.source, tc.branch, tc.created, got, tc.want)
			}
			if one, err := c.ServerSettingsOf(ctx, tc.source, tc.branch, tc.created); err != nil || one != tc.want {
				t.Errorf("ServerSettingsOf(%q, %q) = %+v, %v", tc.source, tc.branch, one, err)
			}
		}
	})
}

// TestFreeTextStored: free text with NUL bytes and invalid UTF-8 (a reason, an
// error message, an audit entry) is stored by both backends alike, cleaned: NUL
// bytes dropped, invalid sequences replaced, instead of Postgres refusing it.
func TestFreeTextStored(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		addSources(t, c, "a")
		dirty, clean := "bad\x00 byte \xff\xfe end", "bad byte \uFFFD end"
		b := catalog.Branch{Source: "a", Name: "b", State: catalog.Creating, Error: dirty}
		id, err := c.InsertBranch(ctx, b, "create: "+dirty)
		if err != nil {
			t.Fatalf("InsertBranch with dirty text: %v", err)
		}
		b.ID, b.State = id, catalog.Failed
		if err := c.UpdateBranch(ctx, b, dirty); err != nil {
			t.Fatalf("UpdateBranch with a dirty reason: %v", err)
		}
		if err := c.AppendAudit(ctx, catalog.AuditEntry{At: time.Unix(1, 0), Actor: "local", Action: "branch.create",
			Target: dirty, Result: "500: " + dirty}); err != nil {
			t.Fatalf("AppendAudit with dirty text: %v", err)
		}
		got, err := c.Branches(ctx)
		if err != nil || len(got) != 1 || got[0].Error != clean {
			t.Fatalf("branches %+v, %v; want the error %q", got, err, clean)
		}
		tr, err := c.Transitions(ctx, "a", "b")
		if err != nil || len(tr) != 2 || tr[0].Reason != "create: "+clean || tr[1].Reason != clean {
			t.Fatalf("transitions %+v, %v; want reasons cleaned", tr, err)
		}
		au, err := c.Audit(ctx, time.Time{})
		if err != nil || len(au) != 1 || au[0].Target != clean || au[0].Result != "500: "+clean {
			t.Fatalf("audit %+v, %v; want target and result cleaned", au, err)
		}
	})
}

package catalog_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// contents is everything a catalog holds, read through its methods.
type contents struct {
	Sources     []catalog.Source
	Seeds       []catalog.Seed
	Branches    []catalog.Branch
	Transitions map[string][]catalog.Transition
	Settings    map[string]catalog.ServerSettings
	Tokens      []catalog.Token
	Audit       []catalog.AuditEntry
	StateID     string
	Nodes       []catalog.Node
}

func read(t *testing.T, c *catalog.Catalog) contents {
	t.Helper()
	ctx := context.Background()
	var k contents
	var err error
	if k.Sources, err = c.Sources(ctx); err != nil {
		t.Fatal(err)
	}
	if k.Seeds, err = c.Seeds(ctx); err != nil {
		t.Fatal(err)
	}
	if k.Branches, err = c.Branches(ctx); err != nil {
		t.Fatal(err)
	}
	k.Transitions, k.Settings = map[string][]catalog.Transition{}, map[string]catalog.ServerSettings{}
	for _, b := range append(k.Branches, catalog.Branch{Source: "a", Name: "gone"}) {
		if k.Transitions[b.Name], err = c.Transitions(ctx, b.Source, b.Name); err != nil {
			t.Fatal(err)
		}
		if k.Settings[b.Name], err = c.ServerSettingsOf(ctx, b.Source, b.Name, b.CreatedAt); err != nil {
			t.Fatal(err)
		}
	}
	if k.Settings[""], err = c.ServerSettingsOf(ctx, "a", "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if k.Tokens, err = c.Tokens(ctx); err != nil {
		t.Fatal(err)
	}
	if k.Audit, err = c.Audit(ctx, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if k.StateID, err = c.StateID(ctx); err != nil {
		t.Fatal(err)
	}
	if k.Nodes, err = c.Nodes(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range k.Nodes {
		k.Nodes[i].LeaseAge = 0 // measured when read
	}
	return k
}

// fill writes rows to every table, with every kind of value.
func fill(t *testing.T, c *catalog.Catalog) {
	t.Helper()
	ctx := context.Background()
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.Bind(ctx, "state-1")
	check(err)
	_, err = c.Register(ctx, "state-1", "127.0.0.1:6432", time.Hour)
	check(err)
	check(c.Heartbeat(ctx, "127.0.0.1:6432", "", time.Hour, catalog.Load{Running: 1, MaxRunning: 4, FreeBytes: 1 << 40}))
	check(c.AddSource(ctx, catalog.Source{Name: "a", Kind: "sql", Spec: "/a.sql", DefaultDatabase: "app",
		Options: "mask=1", CreatedAt: at(0), Warm: 2}))
	check(c.AddSource(ctx, catalog.Source{Name: "b", Kind: "empty", CreatedAt: at(1), Warm: -1}))
	s, err := c.AddSeed(ctx, catalog.Seed{Source: "a", Dir: "/seeds/a/1", CreatedAt: at(2)})
	check(err)
	s.State, s.PGVersion, s.Databases, s.Superuser, s.Roles, s.ReadyAt = catalog.SeedReady, "15", []string{"app", "postgres"}, "postgres", `{"x":1}`, at(3)
	s.Manifest = "0123abcd"
	check(c.UpdateSeed(ctx, s))
	check(c.AddSeedCopy(ctx, s.ID))
	b := fullBranch("a", "feature")
	b.SeedID = s.ID
	b.ID, err = c.InsertBranch(ctx, b, "create")
	check(err)
	b.State = catalog.Running
	check(c.UpdateBranch(ctx, b, "started"))
	pooled := catalog.Branch{Source: "a", Name: "_pool-1", SeedID: s.ID, State: catalog.Running, Pooled: true, CreatedAt: at(4)}
	_, err = c.InsertBranch(ctx, pooled, "warm pool")
	check(err)
	gone := catalog.Branch{Source: "a", Name: "gone", State: catalog.Creating}
	gone.ID, err = c.InsertBranch(ctx, gone, "create")
	check(err)
	check(c.DeleteBranch(ctx, gone, "destroyed"))
	check(c.SetServerSettings(ctx, "a", "", time.Time{}, catalog.ServerSettings{Image: "pg:15", CPUs: 2, MemoryBytes: 1 << 30}))
	check(c.SetServerSettings(ctx, "a", "feature", b.CreatedAt, catalog.ServerSettings{CPUs: 0.5, PIDs: 64}))
	check(c.AddToken(ctx, catalog.Token{Name: "ci", Role: "ci", Prefix: "pr-", Hash: []byte{0, 1, 255}, CreatedAt: at(5)}))
	check(c.AppendAudit(ctx, catalog.AuditEntry{At: at(6), Actor: "local", Action: "branch.create", Target: "feature", Result: "ok"}))
	_, err = c.AuthSecret(ctx)
	check(err)
}

// TestCopy moves a catalog between every pair of backends: every row arrives,
// ids continue after the copied ones, and a destination with rows is refused
// unless forced.
func TestCopy(t *testing.T) {
	t.Parallel()
	for _, from := range backends {
		for _, to := range backends {
			t.Run(from.name+"_to_"+to.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				src, _ := from.open(t)
				dst, _ := to.open(t)
				fill(t, src)
				want := read(t, src)
				n, err := catalog.Copy(ctx, src, dst, false)
				if err != nil {
					t.Fatalf("Copy: %v", err)
				}
				wantN := catalog.Copied{"sources": 2, "seeds": 1, "branches": 2, "transitions": 5,
					"server_settings": 2, "tokens": 1, "audit": 1, "binding": 1, "auth_secret": 1, "nodes": 1, "node_seeds": 1}
				if !reflect.DeepEqual(n, wantN) {
					t.Errorf("Copy copied %v, want %v", n, wantN)
				}
				if got := read(t, dst); !reflect.DeepEqual(got, want) {
					t.Fatalf("destination holds\n%+v\nwant\n%+v", got, want)
				}
				id, err := dst.InsertBranch(ctx, catalog.Branch{Source: "a", Name: "next", State: catalog.Creating}, "create")
				if err != nil {
					t.Fatalf("insert after copy: %v", err)
				}
				for _, b := range want.Branches {
					if id <= b.ID {
						t.Errorf("new branch id %d, want after the copied %d", id, b.ID)
					}
				}
				if _, err := catalog.Copy(ctx, src, dst, false); !errors.Is(err, catalog.ErrNotEmpty) {
					t.Fatalf("Copy into a catalog with rows = %v, want ErrNotEmpty", err)
				}
				if _, err := catalog.Copy(ctx, src, dst, true); err != nil {
					t.Fatalf("Copy with force: %v", err)
				}
				if got := read(t, dst); !reflect.DeepEqual(got, want) {
					t.Fatalf("destination after a forced copy holds\n%+v\nwant\n%+v", got, want)
				}
			})
		}
	}
}

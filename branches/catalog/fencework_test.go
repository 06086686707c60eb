package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// workRows is what the writes of a node's work (sources, seeds, server
// settings) may change, read back whole.
type workRows struct {
	Sources  []catalog.Source
	Seeds    []catalog.Seed
	Settings []catalog.ServerSettings
}

func readWork(t *testing.T, c *catalog.Catalog, created time.Time) workRows {
	t.Helper()
	ctx := context.Background()
	var w workRows
	var err error
	if w.Sources, err = c.Sources(ctx); err != nil {
		t.Fatal(err)
	}
	if w.Seeds, err = c.Seeds(ctx); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"", "b"} {
		s, err := c.ServerSettingsOf(ctx, "a", b, created)
		if err != nil {
			t.Fatal(err)
		}
		w.Settings = append(w.Settings, s)
	}
	return w
}

// TestFenceNodeWork: the writes a node makes for its own work besides branch
// rows (adding and removing a source, building, settling and removing a seed,
// recording server settings) are fenced by its registration like branch writes:
// a process whose registration was replaced or buried, asked without a cached
// verdict, changes nothing and gets ErrNodeLost, and Lost's channel closes. The
// live registration writes. How many pooled branches a source keeps, an
// operator's setting for the whole catalog, is not fenced.
func TestFenceNodeWork(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		live, dsn := bk.open(t)
		if _, err := live.Register(ctx, "n1", "", time.Hour); err != nil {
			t.Fatal(err)
		}
		created := time.Unix(1700000000, 0).UTC()
		if err := live.AddSource(ctx, catalog.Source{Name: "a", Kind: "sql", CreatedAt: created, Warm: -1}); err != nil {
			t.Fatal(err)
		}
		sd, err := live.AddSeed(ctx, catalog.Seed{Source: "a", CreatedAt: created})
		if err != nil {
			t.Fatal(err)
		}
		sd.State, sd.Dir, sd.ReadyAt = catalog.SeedReady, "/state/seeds/a/g1/data", created
		if err := live.UpdateSeed(ctx, sd); err != nil {
			t.Fatal(err)
		}
		if err := live.SetServerSettings(ctx, "a", "", time.Time{}, catalog.ServerSettings{Image: "pg:15", PIDs: 100}); err != nil {
			t.Fatal(err)
		}
		mem := int64(1 << 30)
		if err := live.PatchServerSettings(ctx, "a", "b", created, catalog.ServerSettingsPatch{MemoryBytes: &mem}); err != nil {
			t.Fatal(err)
		}
		before := readWork(t, live, created)

		later := created.Add(time.Hour)
		evil := int64(1)
		writes := map[string]func(c *catalog.Catalog) error{
			"AddSource": func(c *catalog.Catalog) error {
				return c.AddSource(ctx, catalog.Source{Name: "new", Kind: "sql", CreatedAt: created, Warm: -1})
			},
			"DeleteSource": func(c *catalog.Catalog) error { return c.DeleteSource(ctx, "a") },
			"AddSeed": func(c *catalog.Catalog) error {
				_, err := c.AddSeed(ctx, catalog.Seed{Source: "a", CreatedAt: created})
				return err
			},
			"UpdateSeed": func(c *catalog.Catalog) error {
				s := sd
				s.Dir = "/elsewhere"
				return c.UpdateSeed(ctx, s)
			},
			"DeleteSeed": func(c *catalog.Catalog) error { return c.DeleteSeed(ctx, sd.ID) },
			"SetServerSettings": func(c *catalog.Catalog) error {
				return c.SetServerSettings(ctx, "a", "", time.Time{}, catalog.ServerSettings{Image: "evil"})
			},
			// The settings of a newer branch of the same name, as a stale process
			// remembers the older one.
			"PatchServerSettings": func(c *catalog.Catalog) error {
				return c.PatchServerSettings(ctx, "a", "b", later, catalog.ServerSettingsPatch{PIDs: &evil})
			},
		}
		for name, write := range writes {
			// A handle whose registration another one replaces: no cached verdict.
			stale := openAgain(t, dsn)
			if _, err := stale.Register(ctx, "n1", "", time.Hour); err != nil {
				t.Fatal(err)
			}
			if _, err := live.Register(ctx, "n1", "", time.Hour); err != nil {
				t.Fatal(err)
			}
			lost := stale.Lost()
			if err := write(stale); !errors.Is(err, catalog.ErrNodeLost) {
				t.Errorf("%s by a replaced registration = %v, want ErrNodeLost", name, err)
			}
			select {
			case <-lost:
			default:
				t.Errorf("%s refused: Lost's channel is still open", name)
			}
			if got := readWork(t, live, created); !reflect.DeepEqual(got, before) {
				t.Errorf("%s by a replaced registration changed the catalog:\n got %+v\nwant %+v", name, got, before)
			}
		}

		// A buried node is refused too (its row is dead, its epoch unchanged).
		buried := openAgain(t, dsn)
		if _, err := buried.Register(ctx, "n2", "", -time.Hour); err != nil {
			t.Fatal(err)
		}
		catalog.TestSetAnswering(live, 2*time.Minute)
		if s, err := live.Janitor(ctx, time.Minute); err != nil || fmt.Sprint(s.Dead) != "[n2]" {
			t.Fatalf("Janitor = %+v, %v, want n2 dead", s, err)
		}
		if err := writes["UpdateSeed"](buried); !errors.Is(err, catalog.ErrNodeLost) {
			t.Errorf("UpdateSeed by a buried node = %v, want ErrNodeLost", err)
		}
		if got := readWork(t, live, created); !reflect.DeepEqual(got, before) {
			t.Errorf("a buried node changed the catalog:\n got %+v\nwant %+v", got, before)
		}

		// An operator's setting for the whole catalog is not the node's work.
		if err := buried.SetSourceWarm(ctx, "a", 3); err != nil {
			t.Fatalf("SetSourceWarm by a buried node: %v", err)
		}
		// The live registration does all of it.
		for _, name := range []string{"AddSource", "UpdateSeed", "SetServerSettings", "PatchServerSettings", "AddSeed", "DeleteSeed", "DeleteSource"} {
			if err := writes[name](live); err != nil {
				t.Errorf("%s by the live registration: %v", name, err)
			}
		}
		if live.NodeLost() {
			t.Fatal("the live registration counts as lost")
		}
	})
}

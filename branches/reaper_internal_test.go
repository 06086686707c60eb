package branches

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/failpoint"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"go.uber.org/zap"
)

// newUnitManager is a Manager on a real catalog in a temporary directory, with no
// runtime: enough for the reaper's bookkeeping.
func newUnitManager(t *testing.T, fps string) *Manager {
	t.Helper()
	dir := t.TempDir()
	cat, err := catalog.Open(filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	// The source of the branches the tests record (addStopped), with a ready
	// seed, whose id is 1, so that reconcile keeps it.
	ctx := context.Background()
	if err := cat.AddSource(ctx, catalog.Source{Name: "s", Kind: "empty"}); err != nil {
		t.Fatal(err)
	}
	sd, err := cat.AddSeed(ctx, catalog.Seed{Source: "s", Dir: filepath.Join(dir, "seeds", "s", "1")})
	if err != nil {
		t.Fatal(err)
	}
	sd.State = catalog.SeedReady
	if err := cat.UpdateSeed(ctx, sd); err != nil {
		t.Fatal(err)
	}
	set, err := failpoint.Parse(fps)
	if err != nil {
		t.Fatal(err)
	}
	running, _ := simplelru.NewLRU[key, struct{}](math.MaxInt32, nil)
	return &Manager{cfg: Config{StateDir: dir, Failpoints: set, CreateTimeout: time.Minute}, log: zap.NewNop(), cat: cat,
		branches: map[key]*branch{}, sources: map[string]*sourceState{}, running: running,
		kick: make(chan struct{}, 1), creating: make(chan struct{}, 1), restart: make(chan struct{})}
}

// addStopped records a stopped branch last used at t0, as reconcile loads it.
func addStopped(t *testing.T, m *Manager, name string, t0 time.Time) *branch {
	t.Helper()
	rec := catalog.Branch{Source: "s", Name: name, SeedID: 1, State: catalog.Stopped, CreatedAt: t0, StateAt: t0, LastUsedAt: t0}
	id, err := m.cat.InsertBranch(context.Background(), rec, "test")
	if err != nil {
		t.Fatal(err)
	}
	rec.ID = id
	b := &branch{rec: rec, persistedUse: t0}
	m.branches[key{"s", name}] = b
	return b
}

func lastUseInCatalog(t *testing.T, m *Manager, id int64) time.Time {
	t.Helper()
	all, err := m.cat.Branches(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		if r.ID == id {
			return r.LastUsedAt
		}
	}
	t.Fatalf("branch %d not in the catalog", id)
	return time.Time{}
}

// A last-use time whose write failed (here: the pass ran on a client's context that
// was cancelled, as a disk-budget pass does) is written by a later pass.
func TestReaperRetriesLastUse(t *testing.T) {
	t.Parallel()
	m := newUnitManager(t, "")
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	b := addStopped(t, m, "b", t0)
	used := t0.Add(30 * time.Minute)
	m.mu.Lock()
	b.rec.LastUsedAt = used
	m.mu.Unlock()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	m.reapPass(cancelled, passTimed)
	m.reapPass(context.Background(), passTimed)
	if got := lastUseInCatalog(t, m, b.rec.ID); !got.Equal(used) {
		t.Fatalf("last use in the catalog %s, want %s", got, used)
	}
}

// A usage measurement that started before an operation recorded the branch's bytes
// (a reset writes 0) must not overwrite them.
func TestStaleUsageDiscarded(t *testing.T) {
	t.Parallel()
	m := newUnitManager(t, "usage=1*sleep(400ms)")
	b := addStopped(t, m, "b", time.Now().UTC())
	upper := m.layoutOf(b.rec.ID).upper
	if err := os.MkdirAll(upper, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(upper, "f"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { m.reapPass(context.Background(), passTimed); close(done) }()
	time.Sleep(100 * time.Millisecond) // the measurement waits in its failpoint
	err := m.do(context.Background(), key{"s", "b"}, "reset", nil, func(ctx context.Context, b *branch) error {
		return m.save(ctx, b, "reset", func(r *catalog.Branch) { r.OwnedBytes = 0 })
	})
	if err != nil {
		t.Fatal(err)
	}
	<-done
	m.mu.Lock()
	owned := b.rec.OwnedBytes
	m.mu.Unlock()
	if owned != 0 {
		t.Fatalf("owned bytes after a reset raced a measurement: %d, want 0", owned)
	}
}

// A branch is measured when never measured, used since, or in use; a running one
// without sessions once every idleMeasureEvery; a stopped one not again.
func TestDueMeasure(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	var running runtime.Instance = struct{ runtime.Instance }{}
	for _, tc := range []struct {
		name string
		b    branch
		at   time.Time
		want bool
	}{
		{"never measured", branch{}, t0, true},
		{"used since", branch{measuredAt: t0, rec: catalog.Branch{LastUsedAt: t0.Add(time.Second)}}, t0.Add(2 * time.Second), true},
		{"in use", branch{measuredAt: t0, sessions: 1, inst: running}, t0.Add(time.Millisecond), true},
		{"running idle, measured lately", branch{measuredAt: t0, inst: running}, t0.Add(idleMeasureEvery / 2), false},
		{"running idle, measured a reaper interval ago", branch{measuredAt: t0, inst: running}, t0.Add(idleMeasureEvery - time.Millisecond), true},
		{"running idle, the clock set back", branch{measuredAt: t0, inst: running}, t0.Add(-time.Minute), true},
		{"stopped, measured after its last use", branch{measuredAt: t0}, t0.Add(time.Hour), false},
	} {
		if got := tc.b.dueMeasure(tc.at); got != tc.want {
			t.Errorf("%s: due %v, want %v", tc.name, got, tc.want)
		}
	}
}

// An in-use branch's roles are read at each timed pass, an idle one's once after
// its use, whatever started the pass.
func TestDueRoles(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	later := t0.Add(rolesEvery)
	for _, tc := range []struct {
		name  string
		b     branch
		timed bool
		now   time.Time
		want  bool
	}{
		{"in use, timed pass", branch{rolesAt: t0, sessions: 1}, true, later, true},
		{"in use, kicked pass", branch{rolesAt: t0, sessions: 1}, false, later, false},
		{"in use, timed pass, read a little under rolesEvery before", branch{rolesAt: t0, sessions: 1}, true, later.Add(-rolesEvery / 20), true},
		{"in use, timed pass, read just before", branch{rolesAt: t0, sessions: 1}, true, t0.Add(rolesEvery / 2), false},
		{"idle, used since", branch{rolesAt: t0, rec: catalog.Branch{LastUsedAt: t0.Add(time.Millisecond)}}, false, later, true},
		{"idle, used since, read just before", branch{rolesAt: t0, rec: catalog.Branch{LastUsedAt: t0.Add(time.Millisecond)}}, true, t0.Add(time.Second), false},
		{"idle, read after its use", branch{rolesAt: t0, rec: catalog.Branch{LastUsedAt: t0}}, true, later, false},
		{"in use, clock set back", branch{rolesAt: t0, sessions: 1}, true, t0.Add(-time.Minute), true},
		{"idle, clock set back", branch{rolesAt: t0, rec: catalog.Branch{LastUsedAt: t0}}, false, t0.Add(-time.Minute), true},
		{"never read", branch{sessions: 1}, true, t0, true},
	} {
		if got := tc.b.dueRoles(tc.timed, tc.now); got != tc.want {
			t.Errorf("%s: due %v, want %v", tc.name, got, tc.want)
		}
	}
}

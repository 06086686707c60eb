package branches

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// fencedBranch adds a stopped branch name to m, registered as node n1, whose row
// another registration of n1 then owns: m's writes of it are fenced. It returns
// the branch and that other registration's catalog (closed with the test).
func fencedBranch(t *testing.T, m *Manager, name string) (*branch, *catalog.Catalog) {
	t.Helper()
	ctx := context.Background()
	if _, err := m.cat.Register(ctx, "n1", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	b := addStopped(t, m, name, time.Now().UTC())
	newer, err := catalog.Open(filepath.Join(m.cfg.StateDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { newer.Close() })
	if _, err := newer.Register(ctx, "n1", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	return b, newer
}

// A write the catalog fences (another registration of this node owns the row
// now) changes nothing, is not retried, and leaves the branch refused and listed
// as fenced.
func TestFencedSave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "")
	b, _ := fencedBranch(t, m, "b")
	ttl := TTL(time.Hour)
	if err := m.Set(ctx, "s", "b", Settings{TTL: &ttl}); !errors.Is(err, ErrFenced) {
		t.Fatalf("Set on a fenced branch = %v, want ErrFenced", err)
	}
	m.mu.Lock()
	fenced, recTTL := b.fenced, b.rec.TTL
	m.mu.Unlock()
	if !fenced || recTTL != 0 {
		t.Fatalf("after a fenced write: fenced %v, ttl %s; want fenced and the old ttl", fenced, recTTL)
	}
	if got := lastUseInCatalog(t, m, b.rec.ID); got.IsZero() {
		t.Fatal("the row went")
	}
	if l := m.List(); len(l) != 1 || l[0].State != "fenced" || l[0].Error == "" {
		t.Fatalf("List = %+v, want b fenced, with the reason", l)
	}
}

// A lost branch can only be destroyed.
func TestLostBranchRefusesStop(t *testing.T) {
	t.Parallel()
	m := newUnitManager(t, "")
	b := addStopped(t, m, "b", time.Now().UTC())
	b.rec.State = catalog.Lost
	if err := m.Stop(context.Background(), "s", "b", OpOptions{}); !errors.Is(err, ErrLost) {
		t.Fatalf("Stop of a lost branch = %v, want ErrLost", err)
	}
	if l := m.List(); len(l) != 1 || l[0].State != "lost" || l[0].Error == "" {
		t.Fatalf("List = %+v, want b lost, with the reason", l)
	}
}

// A write that finds the branch's row declared lost (the janitor buried this
// node) fails with ErrLost, not ErrFenced, and leaves the branch lost: refused
// with ErrLost, destroyable, not "fenced".
func TestLostSave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "")
	if _, err := m.cat.Register(ctx, "n1", "", -time.Hour); err != nil {
		t.Fatal(err)
	}
	b := addStopped(t, m, "b", time.Now().UTC())
	other, err := catalog.Open(filepath.Join(m.cfg.StateDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Register(ctx, "n2", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	if s, err := other.Janitor(ctx, time.Nanosecond); err != nil || s.Lost != 1 {
		t.Fatalf("Janitor = %+v, %v, want b lost", s, err)
	}
	ttl := TTL(time.Hour)
	err = m.Set(ctx, "s", "b", Settings{TTL: &ttl})
	if !errors.Is(err, ErrLost) || errors.Is(err, ErrFenced) {
		t.Fatalf("Set on a lost branch = %v, want ErrLost alone", err)
	}
	m.mu.Lock()
	fenced, state := b.fenced, b.rec.State
	m.mu.Unlock()
	if fenced || state != catalog.Lost {
		t.Fatalf("after the write: fenced %v, state %s; want lost", fenced, state)
	}
	if l := m.List(); len(l) != 1 || l[0].State != "lost" {
		t.Fatalf("List = %+v, want b lost", l)
	}
}

// stubServer stands for a running branch server: it records its stop.
type stubServer struct {
	done    chan struct{}
	stopped sync.Once
}

func newStubServer() *stubServer                        { return &stubServer{done: make(chan struct{})} }
func (s *stubServer) PID() int                          { return 0 }
func (s *stubServer) SocketPath() string                { return "" }
func (s *stubServer) Done() <-chan struct{}             { return s.done }
func (s *stubServer) Stop(context.Context) error        { s.stopped.Do(func() { close(s.done) }); return nil }
func (s *stubServer) Discard(ctx context.Context) error { return s.Stop(ctx) }
func (s *stubServer) Reload() error                     { return nil }

// When any fenced write, here a seed's, finds the node's registration gone, the
// heartbeat's goroutine stops every branch server, not only the branch whose
// write was refused, refuses every branch with ErrNodeLost, writes nothing to
// the catalog, and ends.
func TestNodeLossStopsEveryBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "")
	m.beatKick, m.beatDone = make(chan struct{}, 1), make(chan struct{})
	if _, err := m.cat.Register(ctx, "n1", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	servers := map[string]*stubServer{}
	for _, name := range []string{"a", "b"} {
		b := addStopped(t, m, name, time.Now().UTC())
		b.rec.State, servers[name] = catalog.Running, newStubServer()
		b.inst = servers[name]
	}
	addStopped(t, m, "idle", time.Now().UTC())
	before, err := m.cat.Branches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go m.heartbeat(hctx)

	newer, err := catalog.Open(filepath.Join(m.cfg.StateDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	if _, err := newer.Register(ctx, "n1", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := m.cat.UpdateSeed(ctx, catalog.Seed{ID: 1, Source: "s"}); !errors.Is(err, ErrNodeLost) {
		t.Fatalf("a seed write by the replaced registration = %v, want ErrNodeLost", err)
	}
	<-m.beatDone // the heartbeat's goroutine stopped the servers and ended
	for name, s := range servers {
		select {
		case <-s.done:
		default:
			t.Errorf("branch %s's server was not stopped", name)
		}
	}
	for _, name := range []string{"a", "b", "idle"} {
		m.mu.Lock()
		b := m.branches[key{"s", name}]
		fenced, inst := b.fenced, b.inst
		m.mu.Unlock()
		if !fenced || inst != nil {
			t.Errorf("branch %s after the node was lost: fenced %v, instance %v; want fenced, none", name, fenced, inst)
		}
		if err := m.fencedErr(name); !errors.Is(err, ErrNodeLost) {
			t.Errorf("a session on %s = %v, want ErrNodeLost", name, err)
		}
	}
	after, err := newer.Branches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range before {
		before[i].NodeEpoch = 2 // the new registration adopted them, nothing else
	}
	if !reflect.DeepEqual(after, before) {
		t.Errorf("the catalog's branches changed:\n got %+v\nwant %+v", after, before)
	}
}

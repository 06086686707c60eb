package branches

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// A write the catalog fences (another registration of this node owns the row
// now) changes nothing, is not retried, and leaves the branch refused and listed
// as fenced.
func TestFencedSave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "")
	if _, err := m.cat.Register(ctx, "n1", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	b := addStopped(t, m, "b", time.Now().UTC())
	newer, err := catalog.Open(filepath.Join(m.cfg.StateDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	if _, err := newer.Register(ctx, "n1", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	ttl := time.Hour
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
	if err := m.Stop(context.Background(), "s", "b"); !errors.Is(err, ErrLost) {
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
	ttl := time.Hour
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

package branches

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestDropOrphans: a branch of this node whose catalog row is gone (a failover
// lost it) is removed, directory and all, and forgotten, so that its name can
// be created again; one whose row is there, and one in an operation (a
// creation, whose row may not be written yet), are left alone.
func TestDropOrphans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "")
	if _, err := m.cat.Register(ctx, "n1", "", time.Hour); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC()
	kept, orphan, busy := addStopped(t, m, "kept", t0), addStopped(t, m, "orphan", t0), addStopped(t, m, "busy", t0)
	for _, b := range []*branch{kept, orphan, busy} {
		if err := os.MkdirAll(filepath.Join(m.layoutOf(b.rec.ID).dir, "upper"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The catalog as a failover left it: without the rows of orphan and busy.
	other, err := catalog.Open(filepath.Join(m.cfg.StateDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, b := range []*branch{orphan, busy} {
		if err := other.DeleteBranch(ctx, b.rec, "lost by a failover"); err != nil {
			t.Fatal(err)
		}
	}
	busy.op = &op{what: "create", done: make(chan struct{})}

	if err := m.dropOrphans(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.branches[key{"s", "orphan"}]; ok {
		t.Error("the branch whose row is gone is still this node's")
	}
	if _, err := os.Stat(m.layoutOf(orphan.rec.ID).dir); !os.IsNotExist(err) {
		t.Errorf("the directory of the branch whose row is gone: %v, want it removed", err)
	}
	for _, b := range []*branch{kept, busy} {
		if m.branches[key{"s", b.rec.Name}] != b {
			t.Errorf("branch %s was dropped", b.rec.Name)
		}
		if _, err := os.Stat(m.layoutOf(b.rec.ID).dir); err != nil {
			t.Errorf("the directory of branch %s: %v", b.rec.Name, err)
		}
	}
}

package branches

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// joinAsN1 makes m node n1 of several on its catalog and returns the catalog as
// a second node, n2, sees it (closed when the test ends).
func joinAsN1(t *testing.T, m *Manager) *catalog.Catalog {
	t.Helper()
	ctx := context.Background()
	m.cfg.Join = true
	if _, err := m.cat.Register(ctx, "n1", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	other, err := catalog.Open(filepath.Join(m.cfg.StateDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	if _, err := other.Register(ctx, "n2", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	return other
}

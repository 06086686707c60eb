package catalog_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// backend is one place a catalog can live. Every test that takes a backend is a
// case of the conformance suite: it runs, unchanged, against each of backends.
type backend struct {
	name string
	// newDSN returns what catalog.Open takes for a new, empty catalog.
	newDSN func(t testing.TB) string
}

var backends = []backend{
	{"sqlite", func(t testing.TB) string { return filepath.Join(t.TempDir(), "catalog.db") }},
	// A database of its own on a Postgres 15 server the package's tests start
	// (skipped with -short, like every test that starts PostgreSQL).
	{"postgres", func(t testing.TB) string { return catalog.TestPostgresDSN(t) }},
}

// eachBackend runs fn as a parallel subtest for every backend.
func eachBackend(t *testing.T, fn func(t *testing.T, bk backend)) {
	t.Helper()
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			t.Parallel()
			fn(t, bk)
		})
	}
}

// open opens a new, empty catalog on the backend and closes it when the test
// ends; it returns the catalog and what Open took, to open it again.
func (bk backend) open(t testing.TB) (*catalog.Catalog, string) {
	t.Helper()
	dsn := bk.newDSN(t)
	c, err := catalog.Open(dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if got := c.Backend(); got != bk.name {
		t.Fatalf("Open(%s) is a %s catalog, want %s", catalog.Redact(dsn), got, bk.name)
	}
	return c, dsn
}

// addSources records sources of the names given, of kind empty: a branch row
// needs its source (InsertBranch refuses one of a source not recorded).
func addSources(t testing.TB, c *catalog.Catalog, names ...string) {
	t.Helper()
	for _, name := range names {
		if err := c.AddSource(context.Background(), catalog.Source{Name: name, Kind: "empty"}); err != nil {
			t.Fatalf("AddSource(%s): %v", name, err)
		}
	}
}

package branches

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// A node joins a catalog of other nodes with an empty state directory (a new id
// is written), and again with its own (the catalog knows it as a node); a state
// directory with data the catalog does not know as a node is refused and left as
// it was, and so are a catalog a single server owns (but to that server's own
// directory) and one that catalog migrate retired. A single server refuses the
// nodes' catalog.
func TestJoinCatalog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cat, err := catalog.Open(filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if _, err := cat.Register(ctx, "other", "10.0.0.1:1", time.Hour); err != nil {
		t.Fatal(err)
	}

	fresh := t.TempDir()
	id, err := joinCatalog(ctx, cat, fresh, "cat", "")
	if err != nil || id == "" || id == "other" {
		t.Fatalf("an empty state directory joins: %q %v", id, err)
	}
	if onFile, _ := ReadStateID(fresh); onFile != id {
		t.Fatalf("state-id file %q, want %q", onFile, id)
	}
	if _, err := joinCatalog(ctx, cat, fresh, "cat", "node-9"); !errors.Is(err, ErrNotBound) {
		t.Fatalf("a node whose certificate names another node: %v, want ErrNotBound", err)
	}
	named := t.TempDir()
	if got, err := joinCatalog(ctx, cat, named, "cat", "node-9"); err != nil || got != "node-9" {
		t.Fatalf("a new node named by its certificate: %q %v", got, err)
	}
	if _, err := cat.Register(ctx, id, "10.0.0.2:1", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(fresh, "seeds", "s"), 0o700); err != nil {
		t.Fatal(err)
	}
	if again, err := joinCatalog(ctx, cat, fresh, "cat", ""); err != nil || again != id {
		t.Fatalf("a known node with data joins again: %q %v", again, err)
	}

	stranger := t.TempDir()
	if err := WriteStateID(stranger, "stranger"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(stranger, "branches", "7"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := joinCatalog(ctx, cat, stranger, "cat", ""); !errors.Is(err, ErrNotBound) {
		t.Fatalf("a state directory with data unknown to the catalog: %v, want ErrNotBound", err)
	}
	if onFile, _ := ReadStateID(stranger); onFile != "stranger" {
		t.Fatalf("the refused directory's id became %q", onFile)
	}

	// A catalog bound to a single server takes no node but that server's own
	// state directory; a catalog the nodes share takes no single server.
	if err := cat.SetStateID(ctx, "single"); err != nil {
		t.Fatal(err)
	}
	if _, err := joinCatalog(ctx, cat, t.TempDir(), "cat", ""); !errors.Is(err, ErrNotBound) {
		t.Fatalf("a node on a single server's catalog: %v, want ErrNotBound", err)
	}
	single := t.TempDir()
	if err := WriteStateID(single, "single"); err != nil {
		t.Fatal(err)
	}
	if got, err := joinCatalog(ctx, cat, single, "cat", ""); err != nil || got != "single" {
		t.Fatalf("the single server becoming a node: %q %v", got, err)
	}
	if err := cat.SetStateID(ctx, catalog.ClusterBinding); err != nil {
		t.Fatal(err)
	}
	if err := bindCatalog(ctx, cat, t.TempDir(), "cat"); !errors.Is(err, ErrNotBound) {
		t.Fatalf("a single server on the nodes' catalog: %v, want ErrNotBound", err)
	}
	if got, err := joinCatalog(ctx, cat, t.TempDir(), "cat", "node-10"); err != nil || got != "node-10" {
		t.Fatalf("a node joining the nodes' catalog: %q %v", got, err)
	}

	if err := cat.Retire(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := joinCatalog(ctx, cat, t.TempDir(), "cat", ""); !errors.Is(err, ErrNotBound) {
		t.Fatalf("a retired catalog: %v, want ErrNotBound", err)
	}
}

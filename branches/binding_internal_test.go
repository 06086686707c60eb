package branches

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// A state directory and a catalog from before the state id are bound only when the
// catalog records one of the directory's branches: an old catalog of another state
// directory is refused, and the directory is left as it was.
func TestBindPairFromBeforeTheID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		match bool
	}{{"another state directory's catalog", false}, {"its own catalog", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cat, err := catalog.Open(filepath.Join(dir, "catalog.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer cat.Close()
			if err := cat.AddSource(ctx, catalog.Source{Name: "s", Kind: "empty"}); err != nil {
				t.Fatal(err)
			}
			id, err := cat.InsertBranch(ctx, catalog.Branch{Source: "s", Name: "b", State: catalog.Stopped, CreatedAt: time.Now()}, "test")
			if err != nil {
				t.Fatal(err)
			}
			name := strconv.FormatInt(id+100, 10)
			if tc.match {
				name = strconv.FormatInt(id, 10)
			}
			if err := os.MkdirAll(filepath.Join(dir, "branches", name), 0o700); err != nil {
				t.Fatal(err)
			}
			err = bindCatalog(ctx, cat, dir, "test catalog")
			if tc.match {
				if err != nil {
					t.Fatalf("own catalog refused: %v", err)
				}
				if fileID, _ := ReadStateID(dir); fileID == "" {
					t.Error("bound without writing the state id")
				}
				return
			}
			if !errors.Is(err, ErrNotBound) {
				t.Fatalf("another state directory's catalog: %v, want ErrNotBound", err)
			}
			if fileID, _ := ReadStateID(dir); fileID != "" {
				t.Errorf("a refused catalog left the state id %q", fileID)
			}
			if catID, _ := cat.StateID(ctx); catID != "" {
				t.Errorf("a refused catalog was bound to %q", catID)
			}
		})
	}
}

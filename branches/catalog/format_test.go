package catalog_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestOpenRefusesNewerFormat: a catalog that a newer release wrote (a rollback of
// the binary over a newer state directory) is refused, saying so, and left as it
// is; a catalog from before formats, or of an older one, gets this build's.
func TestOpenRefusesNewerFormat(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := catalog.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddSource(ctx, catalog.Source{Name: "kept", Kind: "sql"}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	version := func() (v int) {
		t.Helper()
		if err := db.QueryRow("SELECT version FROM catalog_format").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := version(); v != catalog.Format {
		t.Fatalf("a new catalog's format: %d, want %d", v, catalog.Format)
	}

	if _, err := db.Exec("UPDATE catalog_format SET version = ?", catalog.Format+1); err != nil {
		t.Fatal(err)
	}
	if c, err := catalog.Open(path); !errors.Is(err, catalog.ErrNewerFormat) || !strings.Contains(err.Error(), "newer pgbranchproxy") {
		if err == nil {
			c.Close()
		}
		t.Fatalf("Open of a newer catalog: %v, want ErrNewerFormat", err)
	}
	if v := version(); v != catalog.Format+1 {
		t.Errorf("the refused catalog's format became %d", v)
	}

	// A catalog from before formats: an older release's, opened by this one.
	if _, err := db.Exec("DROP TABLE catalog_format"); err != nil {
		t.Fatal(err)
	}
	if c, err = catalog.Open(path); err != nil {
		t.Fatalf("Open of a catalog from before formats: %v", err)
	}
	defer c.Close()
	if v := version(); v != catalog.Format {
		t.Errorf("a catalog from before formats got format %d, want %d", v, catalog.Format)
	}
	if s, err := c.Sources(ctx); err != nil || len(s) != 1 || s[0].Name != "kept" {
		t.Errorf("sources after the refusal: %v %v", s, err)
	}
}

package catalog

import (
	"context"
	"path/filepath"
	"testing"
)

// testOpeners open a bare catalog database (no schema) on each backend.
var testOpeners = map[string]func(t *testing.T) (*Catalog, error){
	"sqlite": func(t *testing.T) (*Catalog, error) { return openSQLite(filepath.Join(t.TempDir(), "c.db")) },
	"postgres": func(t *testing.T) (*Catalog, error) {
		return openPostgres(context.Background(), testPostgresDSN(t))
	},
}

func TestMigrateAddsMissingColumnsOnce(t *testing.T) {
	t.Parallel()
	for name, open := range testOpeners {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c, err := open(t)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.db.Exec(c.d.types().Replace("CREATE TABLE t (a <int>)")); err != nil {
				t.Fatal(err)
			}
			cols := []column{{"t", "b", "TEXT NOT NULL DEFAULT ''"}, {"t", "c", "<int> NOT NULL DEFAULT 7"},
				{"t", "d", "<bool> NOT NULL DEFAULT <false>"}}
			for i := 0; i < 2; i++ { // the second run finds every column and adds nothing
				if err := c.tx(ctx, func(tx sqlTx) error { return migrate(ctx, tx.tx, c.d, cols) }); err != nil {
					t.Fatalf("run %d: %v", i, err)
				}
			}
			if _, err := c.exec(ctx, "INSERT INTO t (a) VALUES (?)", 1); err != nil {
				t.Fatal(err)
			}
			var b string
			var cv int
			var d bool
			if err := c.queryRow(ctx, "SELECT b, c, d FROM t").Scan(&b, &cv, &d); err != nil {
				t.Fatal(err)
			}
			if b != "" || cv != 7 || d {
				t.Fatalf("defaults: b=%q c=%d d=%t", b, cv, d)
			}
			err = c.tx(ctx, func(tx sqlTx) error { return migrate(ctx, tx.tx, c.d, []column{{"nosuch", "x", "TEXT"}}) })
			if err == nil {
				t.Fatal("a column of a missing table was added without error")
			}
		})
	}
}

func TestDollarPlaceholders(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"SELECT a FROM t WHERE a = ? AND b = ?", "SELECT a FROM t WHERE a = $1 AND b = $2"},
		{"SELECT '?', \"?\" FROM t WHERE a = ?", "SELECT '?', \"?\" FROM t WHERE a = $1"},
		{"VALUES (?, 'it''s ?', ?)", "VALUES ($1, 'it''s ?', $2)"},
	}
	for _, tc := range tests {
		if got := dollarPlaceholders(tc.in); got != tc.want {
			t.Errorf("dollarPlaceholders(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

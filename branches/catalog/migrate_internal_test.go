package catalog

import (
	"database/sql"
	"path/filepath"
	"testing"
)

func TestMigrateAddsMissingColumnsOnce(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE t (a INTEGER)"); err != nil {
		t.Fatal(err)
	}
	cols := []column{{"t", "b", "TEXT NOT NULL DEFAULT ''"}, {"t", "c", "INTEGER NOT NULL DEFAULT 7"}}
	for i := 0; i < 2; i++ { // the second run finds both and adds nothing
		if err := migrate(db, cols); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	if _, err := db.Exec("INSERT INTO t (a) VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	var b string
	var c int
	if err := db.QueryRow("SELECT b, c FROM t").Scan(&b, &c); err != nil {
		t.Fatal(err)
	}
	if b != "" || c != 7 {
		t.Fatalf("defaults: b=%q c=%d", b, c)
	}
	if err := migrate(db, []column{{"nosuch", "x", "TEXT"}}); err == nil {
		t.Fatal("a column of a missing table was added without error")
	}
}

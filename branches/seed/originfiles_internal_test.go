package seed

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRemoveOriginFiles(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	write := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("LOG:  statement: INSERT ..."), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	gone := []string{"log/postgresql-1.log", "pg_log/postgresql-0.log", "pglogs/a.log", "custom/b/c.csv", "current_logfiles", "pg_stat/pg_stat_statements.stat"}
	kept := []string{"PG_VERSION", "base/1/1259", "postgresql.auto.conf", "pg_stat/pgstat.stat"}
	for _, p := range append(gone, kept...) {
		write(filepath.Join(dir, p))
	}
	os.WriteFile(filepath.Join(dir, "current_logfiles"), []byte("stderr custom/b/c.log\ncsvlog custom/b/c.csv\n"), 0o600)
	write(filepath.Join(outside, "origin.log"))
	if err := os.Symlink(outside, filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}

	removeOriginFiles(dir, "pglogs")
	removeLogs(dir, "linked")
	removeLogs(dir, ".")
	removeLogs(dir, "../"+filepath.Base(outside))
	removeLogs(dir, outside)

	for _, p := range gone {
		if _, err := os.Stat(filepath.Join(dir, p)); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", p, err)
		}
	}
	for _, p := range append(kept, "log", "pglogs") {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "linked")); !os.IsNotExist(err) {
		t.Errorf("the symbolic link to the origin's logs is still there (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "origin.log")); err != nil {
		t.Errorf("a file outside the data directory was removed: %v", err)
	}
}

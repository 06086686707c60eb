package branches

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPoolConf(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "it's data")
	m := &Manager{}
	path, err := m.poolConf(dir, data)
	if err != nil {
		t.Fatal(err)
	}
	read := func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	conf := read()
	if !strings.Contains(conf, "include_if_exists '"+filepath.Join(dir, "it''s data", "postgresql.conf")+"'\n") ||
		!strings.HasSuffix(conf, poolVacuumLine) {
		t.Fatalf("member configuration:\n%s", conf)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode: %v %v", fi.Mode(), err)
	}
	before, _ := os.Stat(path)
	if on, err := vacuumOn(path); err != nil || !on {
		t.Fatalf("vacuumOn = %v, %v", on, err)
	}
	if got := read(); got != strings.Replace(conf, " autovacuum = off", "#autovacuum = off", 1) {
		t.Fatalf("after vacuumOn:\n%s", got)
	}
	// In place: the Docker runtime binds the file itself into the container.
	if after, _ := os.Stat(path); !os.SameFile(before, after) {
		t.Fatal("vacuumOn replaced the file")
	}
	if on, err := vacuumOn(path); err != nil || on {
		t.Fatalf("vacuumOn again = %v, %v; want nothing to do", on, err)
	}
	if on, err := vacuumOn(filepath.Join(dir, "none")); err != nil || on {
		t.Fatalf("vacuumOn of a branch started without the file = %v, %v", on, err)
	}
	// --pg-setting autovacuum=... goes on the command line, above any file.
	m.cfg.Settings = map[string]string{"autovacuum": "on"}
	if path, err := m.poolConf(t.TempDir(), data); err != nil || path != "" {
		t.Fatalf("with --pg-setting autovacuum: %q %v", path, err)
	}
}

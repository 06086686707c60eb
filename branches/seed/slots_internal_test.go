package seed

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestRemoveSlots(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"pg_replslot/cdc/state", "pg_replslot/standby1/state", "pg_replslot/old.tmp/state", "base/1/1259"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var said []string
	if err := removeSlots(dir, func(s string) { said = append(said, s) }); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(filepath.Join(dir, "pg_replslot")); err != nil || len(entries) != 0 {
		t.Errorf("pg_replslot holds %v (%v), want it empty and there", entries, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "base/1/1259")); err != nil {
		t.Errorf("a relation file went: %v", err)
	}
	want := []string{`dropping the replication slot "cdc" of the copied cluster`, `dropping the replication slot "standby1" of the copied cluster`}
	if !slices.Equal(said, want) {
		t.Errorf("progress %q, want %q", said, want)
	}
	if err := removeSlots(t.TempDir(), func(string) {}); err != nil {
		t.Errorf("a data directory without pg_replslot: %v", err)
	}
}

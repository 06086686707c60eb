package branches

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

func TestOnlyVanished(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		out  string
		want bool
	}{
		{"", false},
		{"cp: cannot stat '/s/upper/./pg_wal/000000010000000000000009': No such file or directory\n", true},
		{"cp: cannot stat '/s/upper/./base/16384/t4_16446': No such file or directory\n" +
			"cp: cannot open '/s/upper/./base/16384/16450' for reading: No such file or directory\n" +
			"cp: cannot access '/s/upper/./base/16390': No such file or directory", true},
		// A directory that went after cp made its copy: its attributes could not be read.
		{"cp: cannot access '/s/upper/./pg_replslot/pgbranch_copy_1f': No such file or directory\n" +
			"cp: '/s/upper/./pg_replslot/pgbranch_copy_1f': No such file or directory", true},
		{"cp: '/s/upper/./pg_replslot/pgbranch_copy_1f.tmp': No such file or directory", true},
		{"cp: '/s/layer/./base/1': No such file or directory", false},
		{"cp: cannot create regular file '/s/layer/./base/1': No such file or directory", false},
		{"cp: error writing '/s/layer/./base/1/1259': No space left on device", false},
		{"cp: cannot stat '/s/upper/./pg_wal/x': No such file or directory\ncp: error writing '/s/layer/y': No space left on device", false},
		{"cp: cannot open '/s/upper/./base/1/1259' for reading: Permission denied", false},
	} {
		if got := onlyVanished(c.out, "/s/upper"); got != c.want {
			t.Errorf("onlyVanished(%q) = %v, want %v", c.out, got, c.want)
		}
	}
}

// An online copy of a parent whose replication slots come and go under it (each
// copy of a fan-out creates a temporary slot and drops it, as Postgres does: made
// as NAME.tmp and renamed, renamed to NAME.tmp and removed) succeeds, and leaves
// no slot the fork could not start with: none of the copies' own, and no slot
// directory without its state file.
func TestCopyLiveSlotsComeAndGo(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "upper")
	slots := filepath.Join(src, "pg_replslot")
	if err := os.MkdirAll(filepath.Join(slots, "cdc"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(slots, "cdc", "state"), []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		name := filepath.Join(slots, copySlotPrefix+"0123")
		for !stop.Load() {
			os.Mkdir(name+".tmp", 0o700)
			os.WriteFile(filepath.Join(name+".tmp", "state"), []byte("slot"), 0o600)
			os.Rename(name+".tmp", name)
			os.Rename(name, name+".tmp")
			os.RemoveAll(name + ".tmp")
		}
	}()
	defer func() { stop.Store(true); <-churned }()
	for i := range 300 {
		dst := filepath.Join(t.TempDir(), "layer")
		if err := copyLive(context.Background(), src, dst); err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
		removeCopiedSlots(dst)
		entries, err := os.ReadDir(filepath.Join(dst, "pg_replslot"))
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Name() != "cdc" {
			t.Fatalf("copy %d: slots %v, want cdc alone", i, entries)
		}
		if b, err := os.ReadFile(filepath.Join(dst, "pg_replslot", "cdc", "state")); err != nil || string(b) != "kept" {
			t.Fatalf("copy %d: cdc's state %q (%v)", i, b, err)
		}
	}
}

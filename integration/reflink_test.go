package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestReflinkUsage runs a server whose state directory is on a loop-mounted XFS with
// reflink=1: the copy-up probe must say clone, and a 1-row update of a table must
// count only the blocks it changed, not the whole copied-up file.
func TestReflinkUsage(t *testing.T) {
	if _, err := exec.LookPath("mkfs.xfs"); err != nil {
		t.Fatal("mkfs.xfs not found: install xfsprogs (make deps does)")
	}
	dir, err := os.MkdirTemp("", "pgbranch-xfs-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o711)
	img, mnt := filepath.Join(dir, "xfs.img"), filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o711)
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(2 << 30)
	f.Close()
	if out, err := exec.Command("mkfs.xfs", "-q", "-m", "reflink=1", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.xfs: %v\n%s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount loop XFS: %v\n%s", err, out)
	}
	// Cleanups run last-in first-out: the server stops before this unmounts.
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
		os.RemoveAll(dir)
	})
	os.Chmod(mnt, 0o711)
	state := filepath.Join(mnt, "state")
	t.Cleanup(func() { assertNothingLeft(t, mnt) })

	s := startServer(t, state)
	var info struct {
		CopyUpMode string `json:"copy_up_mode"`
	}
	if err := json.Unmarshal([]byte(s.mustCLI("info")), &info); err != nil || info.CopyUpMode != "clone" {
		t.Fatalf("copy-up mode on XFS reflink=1: %q (%v)", info.CopyUpMode, err)
	}
	s.seedSQL("rl", `CREATE TABLE t (id int PRIMARY KEY, pad text);
		INSERT INTO t SELECT g, repeat('r', 200) FROM generate_series(1, 200000) g;`)
	if out, err := s.psql(t, "rl@clone", "SELECT count(*) FROM t"); err != nil || out != "200000" {
		t.Fatalf("%q %v", out, err)
	}
	upper := s.upperOf(t, "clone")
	before := s.branches()["clone"].OwnedBytes
	if out, err := s.psql(t, "rl@clone", "UPDATE t SET pad = 'changed' WHERE id = 1; CHECKPOINT"); err != nil {
		t.Fatalf("%q %v", out, err)
	}
	after := s.branches()["clone"].OwnedBytes
	copied := relationBytes(t, upper) // allocated, as du counts it: includes the shared blocks
	t.Logf("owned bytes before %d, after a 1-row update %d; relation files in upper by st_blocks %d", before, after, copied)
	if copied < 30<<20 {
		t.Fatalf("the update did not copy the table's file up (%d bytes)", copied)
	}
	if after-before > 4<<20 {
		t.Errorf("a 1-row update counts %d owned bytes on a cloning filesystem", after-before)
	}
}

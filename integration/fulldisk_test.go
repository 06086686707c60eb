package integration

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the catalog's driver, to check it
)

// loopFS makes a small ext4 filesystem on a loop device, mounted on a new directory,
// and removes it all when the test ends.
func loopFS(t *testing.T, sizeMB int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgbranch-full-")
	if err != nil {
		t.Fatal(err)
	}
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	run := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("truncate", "-s", strconv.Itoa(sizeMB)+"M", img)
	run("mkfs.ext4", "-q", "-F", img)
	dev := run("losetup", "--find", "--show", img)
	os.Mkdir(mnt, 0o711)
	run("mount", dev, mnt)
	os.Chmod(dir, 0o711)
	os.Chmod(mnt, 0o711)
	t.Cleanup(func() {
		assertNothingLeft(t, mnt)
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		exec.Command("losetup", "-d", dev).Run()
		os.RemoveAll(dir)
	})
	return mnt
}

// TestFullDisk fills a small state filesystem from one branch. The writing client
// gets an error, another branch keeps answering, a new branch is refused with 53100
// (not an internal error), the catalog and the seed survive, and once the filling
// branch is reset everything works again without a restart. Then the catalog's own
// writes fail for a few seconds (root's reserved blocks taken too), with the same
// outcome. The catalog is the SQLite file in the state directory in every run (also
// under INTEGRATION_CATALOG=postgres): the full filesystem is the catalog's too.
func TestFullDisk(t *testing.T) {
	mnt := loopFS(t, 300)
	state := filepath.Join(mnt, "state")
	s := startServer(t, state, "--reap-interval", "500ms", "--catalog", filepath.Join(state, "catalog.db"))
	s.seedSQL("app", lifecycleSQL)
	seedSum := seedChecksum(t, seedDir(s, "app"))
	ctx := context.Background()
	other := s.connect(t, "app@other")
	if _, err := other.Exec(ctx, "UPDATE t SET v = 'before' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}

	out, err := s.psql(t, "app@filler", "CREATE TABLE big AS SELECT g, repeat('x', 2000) AS pad FROM generate_series(1, 400000) g")
	if err == nil {
		t.Fatalf("filling a 300 MB disk with 800 MB succeeded: %s", out)
	}
	t.Logf("the filling client got: %s", out)

	var v string
	if err := other.QueryRow(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v); err != nil || v != "before" {
		t.Errorf("the other branch's session while the disk is full: %q %v", v, err)
	}
	_, err = s.connectErr("app@newcomer")
	if code := pgCode(err); code != "53100" {
		t.Errorf("a new branch while the disk is full: %v (SQLSTATE %q), want 53100\n%s", err, code, s.logs())
	}
	if b, ok := s.branches()["newcomer"]; ok {
		t.Errorf("refused branch left in the catalog: %+v", b)
	}

	s.mustCLI("branch", "reset", "filler")
	eventually(t, 20*time.Second, "a new branch once space is back", func() bool {
		_, err := s.connectErr("app@newcomer")
		return err == nil
	})
	if _, err := other.Exec(ctx, "UPDATE t SET v = 'after' WHERE id = 1"); err != nil {
		t.Errorf("the other branch after the reset: %v", err)
	}
	if out, err := s.psql(t, "app@filler", "SELECT count(*) FROM t"); err != nil || out != "1000" {
		t.Errorf("the filling branch after its reset: %q %v", out, err)
	}
	if sum := seedChecksum(t, seedDir(s, "app")); sum != seedSum {
		t.Error("the seed changed")
	}
	checkCatalog(t, filepath.Join(state, "catalog.db"))

	// Now the catalog's own writes fail too: root's reserve is taken as well.
	hog := filepath.Join(mnt, "hog")
	exec.Command("dd", "if=/dev/zero", "of="+hog, "bs=1M").Run() // ends with ENOSPC
	_, err = s.connectErr("app@late")
	if code := pgCode(err); code != "53100" {
		t.Errorf("a new branch while the catalog cannot write: %v (SQLSTATE %q), want 53100\n%s", err, code, s.logs())
	}
	if err := other.QueryRow(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v); err != nil || v != "after" {
		t.Errorf("the other branch's session while the catalog cannot write: %q %v", v, err)
	}
	if _, ok := s.branches()["other"]; !ok {
		t.Error("branch ls while the catalog cannot write lost a branch")
	}
	time.Sleep(2 * time.Second) // a few reaper passes whose writes fail
	if err := os.Remove(hog); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a new branch once the catalog can write again", func() bool {
		_, err := s.connectErr("app@late")
		return err == nil
	})
	checkCatalog(t, filepath.Join(state, "catalog.db"))
	if sum := seedChecksum(t, seedDir(s, "app")); sum != seedSum {
		t.Error("the seed changed")
	}
	other.Close(ctx)
	s.stop()
}

// checkCatalog runs SQLite's integrity check on the catalog, read-only.
func checkCatalog(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil || res != "ok" {
		t.Errorf("catalog integrity: %q %v", res, err)
	}
}

package branches

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

const testSegment = "000000010000000000000004"

// writeSparseSegment writes a 16 MiB segment with two 8 KiB pages of data and
// holes elsewhere, and returns its content.
func writeSparseSegment(t *testing.T, path string) []byte {
	t.Helper()
	want := make([]byte, 16<<20)
	for _, off := range []int{0, 1 << 20} {
		for i := range 8192 {
			want[off+i] = byte(i%251 + 1)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, off := range []int64{0, 1 << 20} {
		if _, err := f.WriteAt(want[off:off+8192], off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(16 << 20); err != nil {
		t.Fatal(err)
	}
	return want
}

// A new branch's upper layer gets the seed's one segment with its data and its
// holes, and is left alone once it has pg_wal.
func TestPresetWAL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lower, upper := filepath.Join(dir, "seed"), filepath.Join(dir, "upper")
	if err := os.MkdirAll(filepath.Join(lower, "pg_wal", "archive_status"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(lower, "pg_wal"), 0o750); err != nil {
		t.Fatal(err)
	}
	want := writeSparseSegment(t, filepath.Join(lower, "pg_wal", testSegment))
	// An earlier preset was interrupted: its half-made copy is not used.
	tmp := filepath.Join(dir, "wal.tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, testSegment), []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := presetWAL(lower, upper, filepath.Join(dir, "wal.tmp"), os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(upper, "pg_wal", testSegment)
	got, err := os.ReadFile(copied)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the copied segment differs from the seed's")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(copied, &st); err != nil {
		t.Fatal(err)
	}
	if allocated := st.Blocks * 512; allocated >= 1<<20 {
		t.Errorf("the copy allocates %d bytes: its holes were filled", allocated)
	}
	if fi, _ := os.Stat(filepath.Join(upper, "pg_wal")); fi.Mode().Perm() != 0o750 {
		t.Errorf("upper pg_wal mode %v, want the seed's 0750", fi.Mode().Perm())
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("the working directory is left: %v", err)
	}

	// Written by the server since: not copied again.
	if err := os.WriteFile(copied, []byte("written"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := presetWAL(lower, upper, filepath.Join(dir, "wal.tmp"), os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(copied); string(got) != "written" {
		t.Error("a second preset replaced the branch's own segment")
	}
}

// A layer with other than one segment is left to OverlayFS.
func TestPresetWALNeedsOneSegment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lower, upper := filepath.Join(dir, "seed"), filepath.Join(dir, "upper")
	if err := os.MkdirAll(filepath.Join(lower, "pg_wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, seg := range []string{testSegment, "000000010000000000000005"} {
		writeSparseSegment(t, filepath.Join(lower, "pg_wal", seg))
	}
	if err := presetWAL(lower, upper, filepath.Join(dir, "wal.tmp"), os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(upper, "pg_wal")); !os.IsNotExist(err) {
		t.Errorf("upper pg_wal made for a seed with two segments: %v", err)
	}
}

package overlay_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/overlay"
)

func TestValidPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path string
		ok   bool
	}{
		{"/state/branches/a/upper", true},
		{"/with space/and-dash_under.dot", true},
		{"/ünïcode/ok", true},
		{"", true},
		{"/a,b", false},
		{"/a:b", false},
		{"/a\x00b", false},
		{"/a\nb", false},
		{",", false},
		{"/lower1:/lower2", false},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			err := overlay.ValidPath(tc.path)
			if (err == nil) != tc.ok {
				t.Errorf("ValidPath(%q) = %v, want ok %v", tc.path, err, tc.ok)
			}
		})
	}
}

// layout makes a lower directory holding one file under dir and returns a Layout
// for an overlay mounted at dir/<name>/merged.
func layout(t *testing.T, dir, name string) overlay.Layout {
	t.Helper()
	base := filepath.Join(dir, name)
	lower := filepath.Join(base, "lower")
	if err := os.MkdirAll(lower, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lower, "file"), []byte("lower "+name), 0o644); err != nil {
		t.Fatal(err)
	}
	return overlay.Layout{
		Lower:  []string{lower},
		Upper:  filepath.Join(base, "upper"),
		Work:   filepath.Join(base, "work"),
		Merged: filepath.Join(base, "merged"),
	}
}

// mount mounts l and unmounts it when the test ends.
func mount(t *testing.T, l overlay.Layout, uid, gid int) {
	t.Helper()
	if err := overlay.Mount(l, uid, gid); err != nil {
		t.Fatalf("Mount: %v", err)
	}
	t.Cleanup(func() {
		if err := overlay.Unmount(l.Merged); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

func isMounted(t *testing.T, target string) bool {
	t.Helper()
	ok, err := overlay.IsMounted(target)
	if err != nil {
		t.Fatalf("IsMounted(%s): %v", target, err)
	}
	return ok
}

func TestMountOwnerAndMode(t *testing.T) {
	needRoot(t)
	t.Parallel()
	tests := []struct {
		name     string
		uid, gid int
	}{
		{"root", 0, 0},
		{"unprivileged", 54321, 54322},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := layout(t, t.TempDir(), "m")
			mount(t, l, tc.uid, tc.gid)
			for _, d := range []string{l.Upper, l.Merged} {
				st, err := os.Stat(d)
				if err != nil {
					t.Fatal(err)
				}
				sys := st.Sys().(*syscall.Stat_t)
				if int(sys.Uid) != tc.uid || int(sys.Gid) != tc.gid || st.Mode().Perm() != 0o700 || !st.IsDir() {
					t.Errorf("%s: uid %d gid %d mode %v, want %d %d drwx------",
						filepath.Base(d), sys.Uid, sys.Gid, st.Mode(), tc.uid, tc.gid)
				}
			}
			got, err := os.ReadFile(filepath.Join(l.Merged, "file"))
			if err != nil || string(got) != "lower m" {
				t.Errorf("merged file = %q, %v; want the lower layer's", got, err)
			}
			// A write lands in upper, the lower layer stays as it was.
			if err := os.WriteFile(filepath.Join(l.Merged, "file"), []byte("changed"), 0o644); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(l.Upper, "file")); err != nil || string(b) != "changed" {
				t.Errorf("upper file = %q, %v; want changed", b, err)
			}
			if b, err := os.ReadFile(filepath.Join(l.Lower[0], "file")); err != nil || string(b) != "lower m" {
				t.Errorf("lower file = %q, %v; want it unchanged", b, err)
			}
		})
	}
}

func TestMountLayerOrder(t *testing.T) {
	needRoot(t)
	t.Parallel()
	dir := t.TempDir()
	l := layout(t, dir, "m")
	top := filepath.Join(dir, "top")
	if err := os.Mkdir(top, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(top, "file"), []byte("top"), 0o644); err != nil {
		t.Fatal(err)
	}
	l.Lower = append([]string{top}, l.Lower...) // top first
	mount(t, l, 0, 0)
	if b, err := os.ReadFile(filepath.Join(l.Merged, "file")); err != nil || string(b) != "top" {
		t.Errorf("merged file = %q, %v; want the top layer's", b, err)
	}
}

func TestMountRejects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := layout(t, dir, "m")
	tests := []struct {
		name   string
		mutate func(l *overlay.Layout)
	}{
		{"no lower", func(l *overlay.Layout) { l.Lower = nil }},
		{"colon in lower", func(l *overlay.Layout) { l.Lower = []string{filepath.Join(dir, "a:b")} }},
		{"comma in upper", func(l *overlay.Layout) { l.Upper = filepath.Join(dir, "up,per") }},
		{"newline in work", func(l *overlay.Layout) { l.Work = filepath.Join(dir, "wo\nrk") }},
		{"NUL in merged", func(l *overlay.Layout) { l.Merged = filepath.Join(dir, "mer\x00ged") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := good
			l.Lower = slices.Clone(good.Lower)
			tc.mutate(&l)
			if err := overlay.Mount(l, 0, 0); err == nil {
				overlay.Unmount(l.Merged)
				t.Fatalf("Mount(%+v) succeeded", l)
			}
		})
	}
	if isMounted(t, good.Merged) {
		t.Error("a refused Mount left a mount behind")
	}
}

func TestMountsUnderAndUnmount(t *testing.T) {
	needRoot(t)
	t.Parallel()
	dir := t.TempDir()
	outer := layout(t, dir, "outer")
	mount(t, outer, 0, 0)
	// A second overlay mounted inside the first one's merged directory.
	innerMP := filepath.Join(outer.Merged, "nested")
	if err := os.Mkdir(innerMP, 0o755); err != nil {
		t.Fatal(err)
	}
	inner := layout(t, dir, "inner")
	inner.Merged = innerMP
	mount(t, inner, 0, 0)
	// A path with a space, which mountinfo escapes as \040.
	spaced := layout(t, dir, "with space")
	mount(t, spaced, 0, 0)

	got, err := overlay.MountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{spaced.Merged, innerMP, outer.Merged}
	if !slices.Equal(got, want) {
		t.Fatalf("MountsUnder = %q, want %q (deepest first)", got, want)
	}
	// A trailing slash names the same directory.
	if got, err := overlay.MountsUnder(dir + "/"); err != nil || !slices.Equal(got, want) {
		t.Errorf("MountsUnder(dir/) = %q, %v; want %q", got, err, want)
	}
	// Only at or below dir: a sibling whose name shares the prefix is not listed.
	if got, err := overlay.MountsUnder(filepath.Join(dir, "out")); err != nil || len(got) != 0 {
		t.Errorf("MountsUnder(%s/out) = %q, %v; want none", dir, got, err)
	}
	if got, err := overlay.MountsUnder(outer.Merged); err != nil || !slices.Equal(got, []string{innerMP, outer.Merged}) {
		t.Errorf("MountsUnder(outer merged) = %q, %v", got, err)
	}

	for _, mp := range want {
		if !isMounted(t, mp) {
			t.Errorf("IsMounted(%s) = false before Unmount", mp)
		}
	}
	if isMounted(t, dir) {
		t.Error("IsMounted(temp dir) = true, but only its descendants are mounted")
	}
	for _, mp := range want {
		if err := overlay.Unmount(mp); err != nil {
			t.Fatalf("Unmount(%s): %v", mp, err)
		}
		if isMounted(t, mp) {
			t.Errorf("IsMounted(%s) = true after Unmount", mp)
		}
	}
	if got, err := overlay.MountsUnder(dir); err != nil || len(got) != 0 {
		t.Errorf("MountsUnder after unmounting all = %q, %v", got, err)
	}
}

func TestUnmountNotMounted(t *testing.T) {
	needRoot(t)
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name, path string
	}{
		{"plain directory", dir},
		{"missing path", filepath.Join(dir, "missing")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if err := overlay.Unmount(tc.path); err != nil {
				t.Errorf("Unmount(%s) = %v, want nil", tc.path, err)
			}
		})
	}
}

func blocksOf(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Blocks * 512
}

func TestAllocatedBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		size   int64 // apparent size
		writes []int64
	}{
		{"empty directory", 0, nil},
		{"sparse 16 MiB with one page", 16 << 20, []int64{0}},
		{"sparse 64 MiB with two pages", 64 << 20, []int64{0, 40 << 20}},
		{"dense 64 KiB", 64 << 10, []int64{0, 4096, 8192, 12288, 16384, 20480, 24576, 28672, 32768, 36864, 40960, 45056, 49152, 53248, 57344, 61440}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			want := blocksOf(t, dir)
			if tc.size > 0 {
				p := filepath.Join(dir, "sub", "data")
				if err := os.Mkdir(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				f, err := os.Create(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Truncate(tc.size); err != nil {
					t.Fatal(err)
				}
				page := bytes.Repeat([]byte{0xAB}, 4096)
				for _, off := range tc.writes {
					if _, err := f.WriteAt(page, off); err != nil {
						t.Fatal(err)
					}
				}
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
				f.Close()
				fileBytes := blocksOf(t, p)
				written := int64(len(tc.writes)) * 4096
				if fileBytes < written || fileBytes > written+64<<10 {
					t.Fatalf("file of %d written bytes has %d allocated: is the filesystem sparse?", written, fileBytes)
				}
				want += blocksOf(t, filepath.Dir(p)) + fileBytes
			}
			got, err := overlay.AllocatedBytes(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("AllocatedBytes = %d, want %d (allocated blocks, not the %d-byte size)", got, want, tc.size)
			}
			if tc.size > 1<<20 && got >= tc.size {
				t.Errorf("AllocatedBytes = %d counts the sparse file's size %d", got, tc.size)
			}
			owned, err := overlay.Usage{Mode: overlay.CopyUpCopy}.Owned(dir)
			if err != nil || owned != got {
				t.Errorf("Usage{copy}.Owned = %d, %v; want AllocatedBytes %d", owned, err, got)
			}
			zero, err := overlay.Usage{}.Owned(dir)
			if err != nil || zero != got {
				t.Errorf("Usage{}.Owned = %d, %v; want AllocatedBytes %d", zero, err, got)
			}
		})
	}
}

func TestAllocatedBytesMissing(t *testing.T) {
	t.Parallel()
	if _, err := overlay.AllocatedBytes(filepath.Join(t.TempDir(), "missing")); !os.IsNotExist(err) {
		t.Errorf("AllocatedBytes(missing) = %v, want a not-exist error", err)
	}
}

func TestExclusiveBytes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "data")
	if err := os.WriteFile(p, bytes.Repeat([]byte{1}, 256<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := overlay.ExclusiveBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing is shared on a fresh file: its extents plus the directory's blocks.
	if want := blocksOf(t, dir) + 256<<10; got < want || got > want+64<<10 {
		t.Errorf("ExclusiveBytes = %d, want about %d", got, want)
	}
	if clone, err := (overlay.Usage{Mode: overlay.CopyUpClone}).Owned(dir); err != nil || clone != got {
		t.Errorf("Usage{clone}.Owned = %d, %v; want ExclusiveBytes %d", clone, err, got)
	}
}

func TestProbeCopyUp(t *testing.T) {
	needRoot(t)
	t.Parallel()
	parent := t.TempDir()
	dir := filepath.Join(parent, "probe")
	mode, err := overlay.ProbeCopyUp(dir)
	if err != nil {
		t.Fatalf("ProbeCopyUp: %v", err)
	}
	// The temporary directory is on ext4 here, where copy-up copies data.
	var fs syscall.Statfs_t
	if err := syscall.Statfs(parent, &fs); err != nil {
		t.Fatal(err)
	}
	const ext4Magic = 0xEF53
	if fs.Type == ext4Magic && mode != overlay.CopyUpCopy {
		t.Errorf("ProbeCopyUp on ext4 = %q, want %q", mode, overlay.CopyUpCopy)
	}
	if mode != overlay.CopyUpCopy && mode != overlay.CopyUpClone {
		t.Errorf("ProbeCopyUp = %q, want copy or clone", mode)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("ProbeCopyUp left %s behind (stat: %v)", dir, err)
	}
	if mps, err := overlay.MountsUnder(parent); err != nil || len(mps) != 0 {
		t.Errorf("ProbeCopyUp left mounts: %q, %v", mps, err)
	}
}

// needRoot skips a test that mounts (or chowns) under -short, which runs only what
// needs neither root nor Postgres, and fails it without root otherwise.
func needRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("mounts OverlayFS (root): skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root (OverlayFS mounts); run as root or with -short")
	}
}

// MountsBelow leaves out the directory itself when it is a mount point (a state
// directory on a volume) and lists what is mounted below it, deepest first.
func TestMountsBelow(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	sub := filepath.Join(dir, "branches", "1")
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	defer syscall.Unmount(sub, syscall.MNT_DETACH)
	got, err := overlay.MountsBelow(dir)
	if err != nil || !slices.Equal(got, []string{sub}) {
		t.Fatalf("MountsBelow = %v, %v; want only %s", got, err, sub)
	}
	if all, _ := overlay.MountsUnder(dir); len(all) != 2 {
		t.Fatalf("MountsUnder = %v, want the directory and the one below", all)
	}
}

package seedcopy_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/seedcopy"
)

// fuzzTree is a small tree: a directory, a file, an empty file, a sparse file with
// data after a hole, and a symlink out of the tree (which Receive creates as it is
// and never follows).
func fuzzTree(t testing.TB) string {
	dir := t.TempDir()
	mkdir(t, filepath.Join(dir, "d"), 0o755)
	writeFile(t, filepath.Join(dir, "d/f"), []byte("hello, seed"), 0o644)
	writeFile(t, filepath.Join(dir, "e"), nil, 0o600)
	// The file ends with its data, so the stream holds 12 bytes of it, not a block:
	// a small seed stream keeps the fuzzer's minimization short.
	writeSparse(t, filepath.Join(dir, "s"), 4096+12, map[int64][]byte{4096: []byte("after a hole")})
	if err := os.Symlink("../../outside", filepath.Join(dir, "d/l")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func FuzzReceive(f *testing.F) {
	src := fuzzTree(f)
	m, err := seedcopy.Build(src, -1)
	if err != nil {
		f.Fatal(err)
	}
	var valid bytes.Buffer
	if err := seedcopy.Send(&valid, src, m); err != nil {
		f.Fatal(err)
	}
	v := valid.Bytes()
	f.Add(v)
	f.Add(v[:len(v)-1])
	f.Add(append(bytes.Clone(v), 'z'))
	f.Add(newStream(m).data(0, []byte("hello, seed")).eof().eof().data(4096, []byte("after a hole")).eof().end())
	f.Add(newStream(m).data(0, []byte("hello, seed")).eof().eof().data(4108, []byte("x")).eof().end())
	f.Add([]byte("PGBSEED\x01"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		base := t.TempDir()
		dst := filepath.Join(base, "g1")
		err := seedcopy.Receive(bytes.NewReader(stream), dst, m, os.Getuid(), os.Getgid())
		left, rerr := os.ReadDir(base)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err != nil {
			if !errors.Is(err, seedcopy.ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			if len(left) != 0 {
				t.Fatalf("a refused copy left %v", left)
			}
			return
		}
		if len(left) != 1 || left[0].Name() != "g1" {
			t.Fatalf("a copy left %v", left)
		}
		got, err := seedcopy.Build(dst, -1)
		if err != nil {
			t.Fatal(err)
		}
		if got.Digest() != m.Digest() {
			t.Fatalf("accepted copy differs:\n got %+v\nwant %+v", got.Entries, m.Entries)
		}
	})
}

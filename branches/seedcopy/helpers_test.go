package seedcopy_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/seedcopy"
)

// Owners used when the tests run as root: the builder's service user, and the ids
// the receiver gives to the service user's entries. Neither needs to exist.
const (
	builderUID  = 23456
	receiverUID = 34567
	receiverGID = 45678
)

const (
	mib        = 1 << 20
	sparseSize = 16 * mib
)

// seedTree builds, under a new directory, a generation directory shaped like a
// seed's: a data directory of the service user with subdirectories, files, an empty
// file, a symlink, a 16 MiB sparse WAL segment with data only at 0, 5 MiB and its
// last byte, a file of several data frames, and a root-owned snapshot.json.
func seedTree(t testing.TB) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "g1")
	mkdir(t, root, 0o700)
	mkdir(t, filepath.Join(root, "data"), 0o700)
	mkdir(t, filepath.Join(root, "data/base"), 0o700)
	mkdir(t, filepath.Join(root, "data/base/1"), 0o700)
	mkdir(t, filepath.Join(root, "data/pg_wal"), 0o700)
	mkdir(t, filepath.Join(root, "data/shared"), 0o2750)
	writeFile(t, filepath.Join(root, "data/PG_VERSION"), []byte("15\n"), 0o600)
	writeFile(t, filepath.Join(root, "data/postmaster.opts"), nil, 0o600)
	writeFile(t, filepath.Join(root, "data/pg_hba.conf"), []byte("local all all trust\n"), 0o644)
	big := make([]byte, 2*mib+12345)
	rand.Read(big)
	writeFile(t, filepath.Join(root, "data/base/1/1259"), big, 0o600)
	sparse := filepath.Join(root, "data/pg_wal/000000010000000000000001")
	writeSparse(t, sparse, sparseSize, map[int64][]byte{0: []byte("page zero"), 5 * mib: []byte("five"), sparseSize - 1: {0x7f}})
	if err := os.Symlink("../PG_VERSION", filepath.Join(root, "data/base/version")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "snapshot.json"), []byte(`{"tables":[]}`), 0o600)
	if os.Geteuid() == 0 {
		chownTree(t, filepath.Join(root, "data"), builderUID, builderUID)
	}
	return root
}

func mkdir(t testing.TB, name string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(name, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Chmod(name, uint32(mode.Perm())|modeBits(mode)); err != nil {
		t.Fatal(err)
	}
}

func modeBits(mode os.FileMode) uint32 {
	if mode&0o2000 != 0 {
		return syscall.S_ISGID
	}
	return 0
}

func writeFile(t testing.TB, name string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(name, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, mode); err != nil {
		t.Fatal(err)
	}
}

// writeSparse creates a file of size bytes holding only the given writes.
func writeSparse(t testing.TB, name string, size int64, at map[int64][]byte) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for off, b := range at {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
}

func chownTree(t testing.TB, root string, uid, gid int) {
	t.Helper()
	err := filepath.Walk(root, func(name string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(name, uid, gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func blocks(t testing.TB, name string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(name, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks
}

// build returns the manifest of dir and the stream Send writes for it.
func build(t testing.TB, dir string) (seedcopy.Manifest, []byte) {
	t.Helper()
	m, err := seedcopy.Build(dir, builderUID)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := seedcopy.Send(&buf, dir, m); err != nil {
		t.Fatal(err)
	}
	return m, buf.Bytes()
}

// receive runs Receive into a new directory and returns the directory.
func receive(t testing.TB, stream []byte, m seedcopy.Manifest) (string, error) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "g1")
	return dst, seedcopy.Receive(bytes.NewReader(stream), dst, m, receiverUID, receiverGID)
}

// wantNothing fails unless neither dir nor dir.part exist: a refused copy leaves
// nothing behind.
func wantNothing(t testing.TB, dir string) {
	t.Helper()
	for _, p := range []string{dir, dir + ".part"} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left behind (lstat: %v)", p, err)
		}
	}
}

// stream writes a stream by hand in the documented format.
type stream struct{ bytes.Buffer }

func newStream(m seedcopy.Manifest) *stream {
	s := &stream{}
	s.WriteString("PGBSEED\x01")
	d, _ := hex.DecodeString(m.Digest())
	s.Write(d)
	return s
}

func (s *stream) data(off uint64, b []byte) *stream {
	s.WriteByte('d')
	s.Write(binary.BigEndian.AppendUint64(nil, off))
	s.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b))))
	s.Write(b)
	return s
}

func (s *stream) eof() *stream { s.WriteByte('f'); return s }
func (s *stream) end() []byte  { s.WriteByte('z'); return s.Bytes() }

package seedcopy_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/seedcopy"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	src := seedTree(t)
	m, stream := build(t, src)
	if files, size := m.Bytes(); files != 6 || size < sparseSize {
		t.Fatalf("Bytes() = %d files, %d bytes; want 6 files, at least %d bytes", files, size, sparseSize)
	}
	if len(stream) > 3*mib {
		t.Fatalf("stream is %d bytes: the holes were sent", len(stream))
	}
	dst, err := receive(t, stream, m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dst + ".part"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf(".part left after a copy: %v", err)
	}
	uid := builderUID
	if os.Geteuid() == 0 {
		uid = receiverUID
	}
	got, err := seedcopy.Build(dst, uid)
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		clearUser(&m)
		clearUser(&got)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("copy differs:\n got %+v\nwant %+v", got.Entries, m.Entries)
	}
	wal := "data/pg_wal/000000010000000000000001"
	sb, db := blocks(t, filepath.Join(src, wal)), blocks(t, filepath.Join(dst, wal))
	if db > sb {
		t.Fatalf("sparse file has %d blocks on the receiver, %d on the sender", db, sb)
	}
	if db*512 >= sparseSize/2 {
		t.Fatalf("sparse file has %d blocks on the receiver: its holes were filled", db)
	}
	if os.Geteuid() == 0 {
		checkOwners(t, dst, m)
	}
}

func clearUser(m *seedcopy.Manifest) {
	for i := range m.Entries {
		m.Entries[i].User = false
	}
}

// checkOwners checks that the service user's entries went to the receiver's ids and
// every other entry to root.
func checkOwners(t *testing.T, dst string, m seedcopy.Manifest) {
	t.Helper()
	users := 0
	for _, e := range m.Entries {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(dst, e.Path), &st); err != nil {
			t.Fatal(err)
		}
		want := [2]uint32{0, 0}
		if e.User {
			want = [2]uint32{receiverUID, receiverGID}
			users++
		}
		if got := [2]uint32{st.Uid, st.Gid}; got != want {
			t.Errorf("%s owned by %v, want %v", e.Path, got, want)
		}
	}
	if users == 0 || users == len(m.Entries) {
		t.Fatalf("%d of %d entries are the service user's: the tree does not test both owners", users, len(m.Entries))
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(dst, "data/shared"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o2750 {
		t.Errorf("data/shared mode %#o, want 0o2750", st.Mode&0o7777)
	}
}

func TestReceiveRefusesFlippedByte(t *testing.T) {
	t.Parallel()
	src := seedTree(t)
	m, stream := build(t, src)
	for marker, entry := range map[string]string{
		"15\n": "data/PG_VERSION", "five": "data/pg_wal/000000010000000000000001", "local all": "data/pg_hba.conf",
	} {
		i := bytes.Index(stream, []byte(marker))
		if i < 0 {
			t.Fatalf("%q not in the stream", marker)
		}
		bad := bytes.Clone(stream)
		bad[i] ^= 0x01
		dst, err := receive(t, bad, m)
		if !errors.Is(err, seedcopy.ErrCorrupt) {
			t.Fatalf("flipped %q: err = %v, want ErrCorrupt", marker, err)
		}
		if !strings.Contains(err.Error(), entry) {
			t.Fatalf("flipped %q: error does not name %s: %v", marker, entry, err)
		}
		wantNothing(t, dst)
	}
}

func TestReceiveRefusesCutStream(t *testing.T) {
	t.Parallel()
	src := seedTree(t)
	m, stream := build(t, src)
	for _, n := range []int{0, 5, 8, 39, 40, 41, 60, len(stream) / 2, len(stream) - 2, len(stream) - 1} {
		dst, err := receive(t, stream[:n], m)
		if !errors.Is(err, seedcopy.ErrCorrupt) {
			t.Fatalf("cut at %d of %d: err = %v, want ErrCorrupt", n, len(stream), err)
		}
		wantNothing(t, dst)
	}
}

func TestReceiveRefusesTrailingBytes(t *testing.T) {
	t.Parallel()
	src := seedTree(t)
	m, stream := build(t, src)
	for _, tail := range []string{"z", "\x00", "garbage"} {
		dst, err := receive(t, append(bytes.Clone(stream), tail...), m)
		if !errors.Is(err, seedcopy.ErrCorrupt) {
			t.Fatalf("tail %q: err = %v, want ErrCorrupt", tail, err)
		}
		wantNothing(t, dst)
	}
}

func TestReceiveRefusesExistingDir(t *testing.T) {
	t.Parallel()
	src := seedTree(t)
	m, stream := build(t, src)
	dst := filepath.Join(t.TempDir(), "g1")
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	err := seedcopy.Receive(bytes.NewReader(stream), dst, m, receiverUID, receiverGID)
	if !errors.Is(err, seedcopy.ErrExists) {
		t.Fatalf("err = %v, want ErrExists", err)
	}
	if entries, _ := os.ReadDir(dst); len(entries) != 0 {
		t.Fatalf("existing directory was written into: %v", entries)
	}
	if _, err := os.Lstat(dst + ".part"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf(".part left: %v", err)
	}
}

func TestReceiveReplacesLeftoverPart(t *testing.T) {
	t.Parallel()
	src := seedTree(t)
	m, stream := build(t, src)
	dst := filepath.Join(t.TempDir(), "g1")
	mkdir(t, dst+".part", 0o755)
	mkdir(t, dst+".part/data", 0o700)
	writeFile(t, dst+".part/data/PG_VERSION", []byte("stale"), 0o600)
	writeFile(t, dst+".part/data/left-over", []byte("from a crash"), 0o600)
	if err := os.Chmod(dst+".part/data", 0o500); err != nil {
		t.Fatal(err)
	}
	if err := seedcopy.Receive(bytes.NewReader(stream), dst, m, receiverUID, receiverGID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "data/left-over")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("left-over file survived: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "data/PG_VERSION")); err != nil || string(b) != "15\n" {
		t.Fatalf("PG_VERSION = %q, %v", b, err)
	}
}

func TestSendRefusesChangedFile(t *testing.T) {
	t.Parallel()
	src := seedTree(t)
	m, _ := build(t, src)
	if err := os.Truncate(filepath.Join(src, "data/PG_VERSION"), 1); err != nil {
		t.Fatal(err)
	}
	err := seedcopy.Send(&bytes.Buffer{}, src, m)
	if !errors.Is(err, seedcopy.ErrChanged) {
		t.Fatalf("err = %v, want ErrChanged", err)
	}
}

func TestBuildRefusesSpecialFiles(t *testing.T) {
	t.Parallel()
	for name, make := range map[string]func(string) error{
		"fifo":   func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"setuid": func(p string) error { return writeMode(p, 0o4755) },
		"setgid": func(p string) error { return writeMode(p, 0o2755) },
	} {
		dir := t.TempDir()
		if err := make(filepath.Join(dir, "x")); err != nil {
			t.Fatal(err)
		}
		if _, err := seedcopy.Build(dir, builderUID); err == nil {
			t.Errorf("%s: Build succeeded", name)
		}
	}
}

func writeMode(p string, mode uint32) error {
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		return err
	}
	return syscall.Chmod(p, mode)
}

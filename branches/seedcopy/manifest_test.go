package seedcopy_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/seedcopy"
)

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// smallManifest is a directory with one file of content "hello" and nothing else.
func smallManifest() seedcopy.Manifest {
	return seedcopy.Manifest{Entries: []seedcopy.Entry{
		{Path: "d", Kind: seedcopy.KindDir, Mode: 0o755},
		{Path: "d/f", Kind: seedcopy.KindFile, Mode: 0o644, Size: 5, SHA256: sum([]byte("hello"))},
	}}
}

func TestReceiveRefusesBadManifest(t *testing.T) {
	t.Parallel()
	file := func(p string) seedcopy.Entry {
		return seedcopy.Entry{Path: p, Kind: seedcopy.KindFile, Mode: 0o644, Size: 0, SHA256: sum(nil)}
	}
	dir := func(p string) seedcopy.Entry { return seedcopy.Entry{Path: p, Kind: seedcopy.KindDir, Mode: 0o755} }
	for name, entries := range map[string][]seedcopy.Entry{
		"absolute":         {file("/escape")},
		"dotdot":           {file("../escape")},
		"inner dotdot":     {dir("a"), file("a/../../escape")},
		"dot":              {file(".")},
		"empty path":       {file("")},
		"unclean":          {dir("a"), file("a//b")},
		"trailing slash":   {dir("a/")},
		"nul":              {file("a\x00b")},
		"parent missing":   {file("a/b")},
		"parent a file":    {file("a"), file("a/b")},
		"parent a symlink": {{Path: "a", Kind: seedcopy.KindSymlink, Mode: 0o777, Target: ".."}, file("a/escape")},
		"parent later":     {file("a/b"), dir("a")},
		"unsorted":         {file("b"), file("a")},
		"duplicate":        {file("a"), file("a")},
		"unknown kind":     {{Path: "a", Kind: "fifo", Mode: 0o644}},
		"setuid":           {{Path: "a", Kind: seedcopy.KindFile, Mode: 0o4755, SHA256: sum(nil)}},
		"setgid file":      {{Path: "a", Kind: seedcopy.KindFile, Mode: 0o2755, SHA256: sum(nil)}},
		"negative size":    {{Path: "a", Kind: seedcopy.KindFile, Mode: 0o644, Size: -1, SHA256: sum(nil)}},
		"bad sha":          {{Path: "a", Kind: seedcopy.KindFile, Mode: 0o644, SHA256: "zz"}},
		"upper sha":        {{Path: "a", Kind: seedcopy.KindFile, Mode: 0o644, SHA256: "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"}},
		"empty target":     {{Path: "a", Kind: seedcopy.KindSymlink, Mode: 0o777}},
		"dir with size":    {{Path: "a", Kind: seedcopy.KindDir, Mode: 0o755, Size: 3}},
		"file with target": {{Path: "a", Kind: seedcopy.KindFile, Mode: 0o644, SHA256: sum(nil), Target: "x"}},
	} {
		m := seedcopy.Manifest{Entries: entries}
		base := t.TempDir()
		dst := filepath.Join(base, "out", "g1")
		if err := os.Mkdir(filepath.Dir(dst), 0o700); err != nil {
			t.Fatal(err)
		}
		s := newStream(m)
		for range entries {
			s.eof()
		}
		err := seedcopy.Receive(bytes.NewReader(s.end()), dst, m, receiverUID, receiverGID)
		if !errors.Is(err, seedcopy.ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
		wantNothing(t, dst)
		if left, _ := os.ReadDir(base); len(left) != 1 {
			t.Errorf("%s: written outside the target: %v", name, left)
		}
		if err := seedcopy.Send(&bytes.Buffer{}, base, m); !errors.Is(err, seedcopy.ErrCorrupt) {
			t.Errorf("%s: Send err = %v, want ErrCorrupt", name, err)
		}
	}
}

func TestReceiveRefusesBadFrames(t *testing.T) {
	t.Parallel()
	m := smallManifest()
	other := smallManifest()
	other.Entries[1].Mode = 0o600
	for name, stream := range map[string][]byte{
		"bad magic":        append([]byte("PGBSEED\x02"), newStream(m).Bytes()[8:]...),
		"other manifest":   newStream(other).data(0, []byte("hello")).eof().end(),
		"beyond size":      newStream(m).data(1, []byte("hello")).eof().end(),
		"far beyond size":  newStream(m).data(1<<63, []byte("h")).eof().end(),
		"overlapping":      newStream(m).data(0, []byte("hel")).data(2, []byte("llo")).eof().end(),
		"out of order":     newStream(m).data(3, []byte("lo")).data(0, []byte("hel")).eof().end(),
		"empty frame":      newStream(m).data(0, nil).data(0, []byte("hello")).eof().end(),
		"unknown tag":      append(newStream(m).Bytes(), 'x', 'f', 'z'),
		"end inside file":  newStream(m).data(0, []byte("hello")).end(),
		"missing eof":      newStream(m).data(0, []byte("hello")).Bytes(),
		"extra eof":        newStream(m).data(0, []byte("hello")).eof().eof().end(),
		"wrong content":    newStream(m).data(0, []byte("world")).eof().end(),
		"missing content":  newStream(m).data(0, []byte("hell")).eof().end(),
		"hole for content": newStream(m).eof().end(),
		"no end":           newStream(m).data(0, []byte("hello")).eof().Bytes(),
	} {
		dst, err := receive(t, stream, m)
		if !errors.Is(err, seedcopy.ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
		wantNothing(t, dst)
	}
	// The same frames, in order and within the size, are accepted, split or not.
	for _, stream := range [][]byte{
		newStream(m).data(0, []byte("hello")).eof().end(),
		newStream(m).data(0, []byte("he")).data(2, []byte("llo")).eof().end(),
	} {
		if _, err := receive(t, stream, m); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReceiveKeepsHolesOfFrames(t *testing.T) {
	t.Parallel()
	content := make([]byte, 3*mib)
	copy(content[2*mib:], "tail")
	m := seedcopy.Manifest{Entries: []seedcopy.Entry{
		{Path: "f", Kind: seedcopy.KindFile, Mode: 0o600, Size: int64(len(content)), SHA256: sum(content)},
	}}
	dst, err := receive(t, newStream(m).data(2*mib, []byte("tail")).eof().end(), m)
	if err != nil {
		t.Fatal(err)
	}
	if b := blocks(t, filepath.Join(dst, "f")); b*512 > 64<<10 {
		t.Fatalf("file has %d blocks: the hole before its only frame was filled", b)
	}
}

func TestDigest(t *testing.T) {
	t.Parallel()
	m := smallManifest()
	// Pinned: the digest names copies in the catalog, so its encoding never changes.
	const want = "43abea55104995e322395ec1aec2296ab7dfb6790b2861d9a9d9cbb50408b416"
	if got := m.Digest(); got != want {
		t.Fatalf("Digest() = %s, want %s", got, want)
	}
	if (seedcopy.Manifest{}).Digest() == m.Digest() {
		t.Fatal("empty manifest has the same digest")
	}
	change := map[string]func(*seedcopy.Entry){
		"path":   func(e *seedcopy.Entry) { e.Path = "d/g" },
		"kind":   func(e *seedcopy.Entry) { e.Kind = seedcopy.KindSymlink },
		"mode":   func(e *seedcopy.Entry) { e.Mode = 0o600 },
		"user":   func(e *seedcopy.Entry) { e.User = true },
		"size":   func(e *seedcopy.Entry) { e.Size = 6 },
		"sha256": func(e *seedcopy.Entry) { e.SHA256 = sum([]byte("world")) },
		"target": func(e *seedcopy.Entry) { e.Target = "x" },
	}
	seen := map[string]string{m.Digest(): "original"}
	for name, fn := range change {
		c := smallManifest()
		fn(&c.Entries[1])
		d := c.Digest()
		if prev, ok := seen[d]; ok {
			t.Errorf("changing %s gives the digest of %s", name, prev)
		}
		seen[d] = name
	}
	// Moving bytes between fields changes the digest too.
	a := seedcopy.Manifest{Entries: []seedcopy.Entry{{Path: "ab", Target: "c"}}}
	b := seedcopy.Manifest{Entries: []seedcopy.Entry{{Path: "a", Target: "bc"}}}
	if a.Digest() == b.Digest() {
		t.Fatal("fields are not delimited in the digest")
	}
}

func TestManifestFile(t *testing.T) {
	t.Parallel()
	src := seedTree(t)
	m, _ := build(t, src)
	path := filepath.Join(t.TempDir(), "manifest.json")
	if err := seedcopy.WriteFile(path, m); err != nil {
		t.Fatal(err)
	}
	got, err := seedcopy.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest() != m.Digest() {
		t.Fatal("manifest changed through its file")
	}
	if _, err := os.Lstat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left: %v", err)
	}
	for _, body := range []string{"not json", `{"entries":[{"path":"../x","kind":"dir","mode":493}]}`} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := seedcopy.ReadFile(path); !errors.Is(err, seedcopy.ErrCorrupt) {
			t.Errorf("ReadFile(%q): err = %v, want ErrCorrupt", body, err)
		}
	}
}

func TestEmptyManifest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m, stream := build(t, dir)
	if len(m.Entries) != 0 {
		t.Fatalf("entries of an empty directory: %v", m.Entries)
	}
	dst, err := receive(t, stream, m)
	if err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(dst); err != nil || len(entries) != 0 {
		t.Fatalf("copy of an empty directory: %v, %v", entries, err)
	}
}

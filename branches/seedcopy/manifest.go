package seedcopy

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"path"
	"strings"
)

// Entry kinds.
const (
	KindDir     = "dir"
	KindFile    = "file"
	KindSymlink = "symlink"
)

// Mode bits a manifest may carry besides the permission bits: setgid and sticky, on
// directories only. Setuid is never copied, nor setgid on a file, because entries
// not owned by the service user become root's on the receiver.
const (
	modeSetgid = 0o2000
	modeSticky = 0o1000
)

// Manifest lists a directory's entries, parents before children, sorted by path
// (plain byte order of the slash-separated paths, which puts every directory before
// what it holds). The zero value is the manifest of an empty directory. A Manifest is
// a value; methods do not change it and are safe for concurrent use.
type Manifest struct {
	Entries []Entry `json:"entries"`
}

// Entry is one directory, regular file or symbolic link under the root. The zero
// value is not a valid entry.
type Entry struct {
	// Path is slash-separated and relative to the root: never empty, ".", absolute
	// or with a ".." element.
	Path string `json:"path"`
	// Kind is KindDir, KindFile or KindSymlink.
	Kind string `json:"kind"`
	// Mode is the permission bits (0o777), plus setgid and sticky on directories.
	Mode uint32 `json:"mode"`
	// User says the entry is owned by the service user; otherwise it is root's.
	User bool `json:"user"`
	// Size is a file's length in bytes, holes included; zero for other kinds.
	Size int64 `json:"size,omitempty"`
	// SHA256 is a file's content hash in lower-case hex, holes read as zeros.
	SHA256 string `json:"sha256,omitempty"`
	// Target is a symbolic link's target, copied as it is.
	Target string `json:"target,omitempty"`
}

// Digest returns the hex SHA-256 of a canonical encoding of m: a version line, the
// entry count, then each entry's fields in a fixed order, strings length-prefixed
// and numbers big-endian. It does not depend on JSON and never changes for a given
// manifest.
func (m Manifest) Digest() string {
	return hex.EncodeToString(m.digest())
}

func (m Manifest) digest() []byte {
	h := sha256.New()
	h.Write([]byte("pgbranchproxy seedcopy manifest 1\n"))
	putUint(h, uint64(len(m.Entries)))
	for _, e := range m.Entries {
		putString(h, e.Path)
		putString(h, e.Kind)
		putUint(h, uint64(e.Mode))
		user := uint64(0)
		if e.User {
			user = 1
		}
		putUint(h, user)
		putUint(h, uint64(e.Size))
		putString(h, e.SHA256)
		putString(h, e.Target)
	}
	return h.Sum(nil)
}

func putUint(h hash.Hash, v uint64) {
	h.Write(binary.BigEndian.AppendUint64(nil, v))
}

func putString(h hash.Hash, s string) {
	putUint(h, uint64(len(s)))
	h.Write([]byte(s))
}

// Bytes returns the number of file entries and the sum of their sizes, holes
// included.
func (m Manifest) Bytes() (files int, size int64) {
	for _, e := range m.Entries {
		if e.Kind == KindFile {
			files++
			size += e.Size
		}
	}
	return files, size
}

// Validate checks that m is safe to create under a directory: every path relative,
// clean and free of "..", in strictly increasing order, its parent an earlier
// directory entry; known kinds; modes, sizes, hashes and targets that fit the kind.
// Errors wrap ErrCorrupt and name the entry.
func (m Manifest) Validate() error {
	dirs := map[string]bool{}
	prev := ""
	for i, e := range m.Entries {
		if err := e.validate(); err != nil {
			return fmt.Errorf("%w: entry %q: %v", ErrCorrupt, e.Path, err)
		}
		if i > 0 && e.Path <= prev {
			return fmt.Errorf("%w: entry %q: not after %q (entries must be sorted by path, each once)", ErrCorrupt, e.Path, prev)
		}
		if parent := path.Dir(e.Path); parent != "." && !dirs[parent] {
			return fmt.Errorf("%w: entry %q: parent %q is not an earlier directory entry", ErrCorrupt, e.Path, parent)
		}
		if e.Kind == KindDir {
			dirs[e.Path] = true
		}
		prev = e.Path
	}
	return nil
}

func (e Entry) validate() error {
	if err := checkPath(e.Path); err != nil {
		return err
	}
	switch e.Kind {
	case KindDir:
		if e.Mode&^(0o777|modeSetgid|modeSticky) != 0 {
			return fmt.Errorf("mode %#o not allowed on a directory", e.Mode)
		}
	case KindFile:
		if e.Mode&^0o777 != 0 {
			return fmt.Errorf("mode %#o not allowed on a file", e.Mode)
		}
		if e.Size < 0 {
			return fmt.Errorf("negative size %d", e.Size)
		}
		if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != sha256.Size || strings.ToLower(e.SHA256) != e.SHA256 {
			return fmt.Errorf("sha256 %q is not 64 lower-case hex digits", e.SHA256)
		}
	case KindSymlink:
		if e.Mode&^0o777 != 0 {
			return fmt.Errorf("mode %#o not allowed on a symlink", e.Mode)
		}
		if e.Target == "" || strings.IndexByte(e.Target, 0) >= 0 {
			return fmt.Errorf("symlink target %q is empty or holds NUL", e.Target)
		}
	default:
		return fmt.Errorf("unknown kind %q", e.Kind)
	}
	if e.Kind != KindFile && (e.Size != 0 || e.SHA256 != "") {
		return fmt.Errorf("a %s has no size or sha256", e.Kind)
	}
	if e.Kind != KindSymlink && e.Target != "" {
		return fmt.Errorf("a %s has no target", e.Kind)
	}
	return nil
}

// checkPath refuses a path that is empty, absolute, not clean, or that holds NUL or
// a ".." element.
func checkPath(p string) error {
	switch {
	case p == "" || p == ".":
		return fmt.Errorf("empty path")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("absolute path")
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("path holds NUL")
	case path.Clean(p) != p:
		return fmt.Errorf("path is not clean")
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return fmt.Errorf("path has a \"..\" element")
		}
	}
	return nil
}

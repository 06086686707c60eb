package seedcopy

import (
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// Build walks dir and returns the manifest of everything under it (dir itself is not
// listed): directories, regular files with their sizes and content hashes (holes
// hashed as zeros, not read), and symbolic links, not followed. An entry is marked
// User when its owner is userUID (pass -1 for none). A setuid bit, a setgid bit on a
// file, or any other kind of file (socket, FIFO, device) is an error: a seed has
// none, and a copy could not keep them safely. Build only reads dir and is safe for
// concurrent use.
func Build(dir string, userUID int) (Manifest, error) {
	if fi, err := os.Lstat(dir); err != nil {
		return Manifest{}, err
	} else if !fi.IsDir() {
		return Manifest{}, fmt.Errorf("manifest of %s: not a directory", dir)
	}
	var m Manifest
	bufs := hashBufs{buf: make([]byte, maxChunk), zeros: make([]byte, zeroChunk)}
	err := filepath.WalkDir(dir, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, name)
		if err != nil {
			return err
		}
		e, err := buildEntry(name, filepath.ToSlash(rel), userUID, bufs)
		if err != nil {
			return fmt.Errorf("manifest of %s: %w", name, err)
		}
		m.Entries = append(m.Entries, e)
		return nil
	})
	if err != nil {
		return Manifest{}, err
	}
	sort.Slice(m.Entries, func(i, j int) bool { return m.Entries[i].Path < m.Entries[j].Path })
	if err := m.Validate(); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// hashBufs are the buffers Build hashes every file with: one for data, one of zeros
// for the holes.
type hashBufs struct{ buf, zeros []byte }

// buildEntry describes the entry at name.
func buildEntry(name, rel string, userUID int, bufs hashBufs) (Entry, error) {
	var st unix.Stat_t
	if err := unix.Lstat(name, &st); err != nil {
		return Entry{}, &fs.PathError{Op: "lstat", Path: name, Err: err}
	}
	e := Entry{Path: rel, Mode: st.Mode & 0o7777, User: userUID >= 0 && st.Uid == uint32(userUID)}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		e.Kind = KindDir
	case unix.S_IFLNK:
		e.Kind, e.Mode = KindSymlink, e.Mode&0o777
		t, err := os.Readlink(name)
		if err != nil {
			return Entry{}, err
		}
		e.Target = t
	case unix.S_IFREG:
		e.Kind, e.Size = KindFile, st.Size
		sum, err := hashPath(name, st.Size, bufs)
		if err != nil {
			return Entry{}, err
		}
		e.SHA256 = hex.EncodeToString(sum)
	default:
		return Entry{}, fmt.Errorf("not a directory, regular file or symlink (mode %#o)", st.Mode)
	}
	if err := e.validate(); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// hashPath hashes the file at name, which must still be size bytes long.
func hashPath(name string, size int64, bufs hashBufs) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sum, err := hashFile(f, size, bufs.buf, bufs.zeros)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if fi.Size() != size {
		return nil, fmt.Errorf("%w: size went from %d to %d while it was hashed", ErrChanged, size, fi.Size())
	}
	return sum, nil
}

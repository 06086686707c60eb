package seedcopy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// removeTree removes p and everything under it, first making its directories
// writable if a plain RemoveAll cannot (a read-only directory of a copy that was
// finished but not renamed, removed by a process that is not root).
func removeTree(p string) error {
	if os.RemoveAll(p) == nil {
		return nil
	}
	filepath.WalkDir(p, func(name string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(name, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}

// renameNoReplace renames from to to, failing with ErrExists if to exists (a plain
// rename would replace an empty directory). Where the filesystem has no
// RENAME_NOREPLACE it checks first, which is racy but only against another copy into
// the same directory, which the caller serialises.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY):
		return fmt.Errorf("rename to %s: %w", to, ErrExists)
	case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS):
		if _, err := os.Lstat(to); err == nil {
			return fmt.Errorf("rename to %s: %w", to, ErrExists)
		}
		return os.Rename(from, to)
	}
	return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
}

// SyncDir fsyncs a directory, so the entries created in it survive a crash.
func SyncDir(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

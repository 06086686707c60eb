package overlay

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Copy-up modes a filesystem gives.
const (
	CopyUpCopy  = "copy"  // copy-up duplicates data blocks (ext4 and most filesystems)
	CopyUpClone = "clone" // copy-up shares the lower file's extents (XFS reflink=1, btrfs)
)

// Usage measures what branches own on one filesystem. The zero value counts
// allocated blocks. Safe for concurrent use.
type Usage struct {
	// Mode is CopyUpCopy or CopyUpClone, from ProbeCopyUp.
	Mode string
}

// Owned returns the bytes the upper layer dir owns: allocated blocks where copy-up
// copies, exclusive extents where it clones.
func (u Usage) Owned(dir string) (int64, error) {
	if u.Mode == CopyUpClone {
		return ExclusiveBytes(dir)
	}
	return AllocatedBytes(dir)
}

// AllocatedBytes sums the allocated size (st_blocks × 512) of every file and directory
// under dir: the bytes a branch's upper layer owns where copy-up copies data (ext4).
// Holes are not counted, so a trimmed WAL segment counts for the pages it holds.
func AllocatedBytes(dir string) (int64, error) {
	return sumTree(dir, func(_ string, info fs.FileInfo) (int64, error) { return allocated(info), nil })
}

// sumTree adds up size(path, info) over every entry under dir, dir included.
func sumTree(dir string, size func(path string, info fs.FileInfo) (int64, error)) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n, err := size(path, info)
		total += n
		return err
	})
	return total, err
}

func allocated(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return 0
}

// ProbeCopyUp finds out whether OverlayFS copy-up under dir copies or clones: it
// mounts a scratch overlay there, opens a 1 MiB lower file read-write (which copies it
// up) and maps the upper copy's extents. dir is created and removed.
func ProbeCopyUp(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	l := Layout{Lower: []string{filepath.Join(dir, "lower")}, Upper: filepath.Join(dir, "upper"),
		Work: filepath.Join(dir, "work"), Merged: filepath.Join(dir, "merged")}
	if err := os.Mkdir(l.Lower[0], 0o700); err != nil {
		return "", err
	}
	data := bytes.Repeat([]byte("pgbranchproxy copy-up probe\n"), (1<<20)/28+1)[:1<<20]
	if err := writeSynced(filepath.Join(l.Lower[0], "probe"), data); err != nil {
		return "", err
	}
	if err := Mount(l, 0, 0); err != nil {
		return "", err
	}
	defer Unmount(l.Merged)
	f, err := os.OpenFile(filepath.Join(l.Merged, "probe"), os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	f.Close()
	up, err := os.Open(filepath.Join(l.Upper, "probe"))
	if err != nil {
		return "", fmt.Errorf("probe file was not copied up: %w", err)
	}
	defer up.Close()
	shared, exclusive, err := extentBytes(up)
	if err != nil {
		return CopyUpCopy, nil // no FIEMAP: assume the common case
	}
	if shared > 0 && exclusive == 0 {
		return CopyUpClone, nil
	}
	return CopyUpCopy, nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

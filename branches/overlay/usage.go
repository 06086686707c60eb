package overlay

import (
	"io/fs"
	"path/filepath"
	"syscall"
)

// AllocatedBytes sums the allocated size (st_blocks × 512) of every file and directory
// under dir: the bytes a branch's upper layer owns where copy-up copies data (ext4).
// Holes are not counted, so a trimmed WAL segment counts for the pages it holds.
func AllocatedBytes(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	return total, err
}

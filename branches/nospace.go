package branches

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// minFreeBytes is the free space below which a failed creation or wake is put down
// to a full disk: Postgres needs a WAL segment and its catalog files to start.
const minFreeBytes = 64 << 20

// noSpace wraps err with ErrNoSpace when the state directory's filesystem is (nearly)
// full for unprivileged writers, as branch servers are; else it returns err. It
// looks at the filesystem rather than at the error's words, which come from several
// programs.
func (m *Manager) noSpace(err error) error {
	if err == nil || errors.Is(err, ErrNoSpace) {
		return err
	}
	var st unix.Statfs_t
	if unix.Statfs(m.cfg.StateDir, &st) != nil {
		return err
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free < minFreeBytes {
		return fmt.Errorf("%w (%d MiB free): %w", ErrNoSpace, free>>20, err)
	}
	return err
}

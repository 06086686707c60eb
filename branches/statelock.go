package branches

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrStateDirInUse: another serve holds the state directory.
var ErrStateDirInUse = errors.New("state directory is in use")

// LockStateDir takes the state directory's lock, an exclusive flock on
// <dir>/serve.lock that holds this process's id, before anything in the directory
// is touched: a second serve on the same directory would otherwise reconcile the
// first one's branches, stopping their servers and unmounting them. The kernel
// drops the lock when the process exits, however it exits.
func LockStateDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "serve.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open state directory lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			holder := "another process"
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = fmt.Sprintf("pgbranchproxy serve (pid %d)", pid)
			}
			return nil, fmt.Errorf("%w: %s is held by %s", ErrStateDirInUse, dir, holder)
		}
		return nil, fmt.Errorf("lock state directory: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A postmaster chdirs to its data directory, and its backends inherit that. When
// the postmaster dies without a shutdown (SIGKILL, the OOM killer) each backend
// exits at its next wait for its client or a lock, but one computing a long
// query runs on until the query ends: it keeps writing into the data directory
// and holds the branch's mount, which cannot be unmounted (nor the branch started
// again) until then. Postgres means such a backend to go with its postmaster, and
// Orphans finds it for that.

// Orphans lists the Postgres processes whose working directory is dir or lies
// below it. Once the postmasters of dir have stopped, these are what they left.
func Orphans(dir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || filepath.Base(exe) != "postgres" {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err == nil && (cwd == dir || strings.HasPrefix(cwd, prefix)) {
			out = append(out, pid)
		}
	}
	return out
}

// KillOrphans kills the processes Orphans finds under dir with SIGKILL and waits
// until each has exited or ctx ends. It returns how many it killed. Only for a
// directory no live postmaster serves.
func KillOrphans(ctx context.Context, dir string) (int, error) {
	pids := Orphans(dir)
	for _, pid := range pids {
		if err := killAndWait(ctx, pid); err != nil {
			return 0, err
		}
	}
	return len(pids), nil
}

// killAndWait sends SIGKILL to pid, which need not be our child, and waits for its
// exit through a pidfd.
func killAndWait(ctx context.Context, pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if n, err := unix.Poll(fds, 100); n > 0 || (err != nil && !errors.Is(err, unix.EINTR)) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

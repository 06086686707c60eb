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
	dir = resolved(dir)
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && orphanIn(pid, dir) {
			out = append(out, pid)
		}
	}
	return out
}

// resolved is dir with its symbolic links resolved, as the kernel shows a
// process's working directory (a state directory linked into place); dir itself
// if it cannot be resolved.
func resolved(dir string) string {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return r
	}
	return dir
}

// orphanIn reports whether pid is a Postgres process whose working directory is
// dir, resolved, or lies below it. A process whose program file was replaced since it
// started (a package upgrade) is one all the same: its exe link ends in
// " (deleted)".
func orphanIn(pid int, dir string) bool {
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	exe, err := os.Readlink(filepath.Join(proc, "exe"))
	if err != nil || filepath.Base(strings.TrimSuffix(exe, " (deleted)")) != "postgres" {
		return false
	}
	cwd, err := os.Readlink(filepath.Join(proc, "cwd"))
	return err == nil && (cwd == dir || strings.HasPrefix(cwd, strings.TrimSuffix(dir, "/")+"/"))
}

// KillOrphans kills the processes Orphans finds under dir with SIGKILL and waits
// until each has exited or ctx ends. It returns how many it killed. Only for a
// directory no live postmaster serves.
func KillOrphans(ctx context.Context, dir string) (int, error) {
	return killOrphans(ctx, dir, Orphans(dir))
}

// killOrphans kills those of pids, listed by Orphans, that are still orphans of
// dir (killOrphan).
func killOrphans(ctx context.Context, dir string, pids []int) (int, error) {
	dir = resolved(dir)
	n := 0
	for _, pid := range pids {
		killed, err := killOrphan(ctx, dir, pid)
		if err != nil {
			return n, err
		}
		if killed {
			n++
		}
	}
	return n, nil
}

// killOrphan sends SIGKILL to pid, which need not be our child, if it is still a
// Postgres process in dir, and waits for its exit through a pidfd. It reports
// whether it killed it. The pid was listed a moment ago: the process may have
// exited since (a backend notices its postmaster's death at its next wait) and
// its pid gone to another process. So the pidfd is opened first and the process
// checked after: while it lives, /proc/<pid> is the one the pidfd holds, and
// once it has exited the signal reaches no one.
func killOrphan(ctx context.Context, dir string, pid int) (bool, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	if !orphanIn(pid, dir) {
		return false, nil
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); errors.Is(err, unix.ESRCH) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if n, err := unix.Poll(fds, 100); n > 0 || (err != nil && !errors.Is(err, unix.EINTR)) {
			return true, err
		}
		if err := ctx.Err(); err != nil {
			return true, err
		}
	}
}

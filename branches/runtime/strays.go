package runtime

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Stray is a postmaster found running on a data directory.
type Stray struct {
	PID     int
	DataDir string
}

// FindPostmasters lists running postmasters whose -D data directory lies under dir:
// servers left behind by a previous run of this state directory. Backends rewrite
// their command line, so only postmasters match.
func FindPostmasters(dir string) ([]Stray, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var out []Stray
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if filepath.Base(args[0]) != "postgres" {
			continue
		}
		for i := 1; i+1 < len(args); i++ {
			if args[i] == "-D" && strings.HasPrefix(args[i+1], prefix) {
				out = append(out, Stray{PID: pid, DataDir: args[i+1]})
				break
			}
		}
	}
	return out, nil
}

// StopStray stops a postmaster that is not our child: fast shutdown, then
// immediate, then SIGKILL if ctx ends first. Its exit is observed with a pidfd.
func StopStray(ctx context.Context, pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, 60_000)
			if n > 0 || (err != nil && !errors.Is(err, unix.EINTR)) {
				return
			}
		}
	}()
	return stopPID(ctx, pid, done)
}

// Alive reports whether pid exists.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || err == unix.EPERM // EPERM: it exists, owned by another user
}

package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// waitReady returns when the postmaster pid has written "ready" into
// dataDir/postmaster.pid (PM_STATUS_READY, Postgres 10 and later), when it exits
// (ErrExited), or when ctx ends. It wakes on inotify events for the data directory and
// re-checks at least every 20 ms in case an event is missed.
func waitReady(ctx context.Context, dataDir string, pid int, exited <-chan struct{}) error {
	events := make(chan struct{}, 1)
	if f := watchDir(dataDir); f != nil {
		defer f.Close()
		go func() {
			buf := make([]byte, 4096)
			for {
				if _, err := f.Read(buf); err != nil {
					return
				}
				select {
				case events <- struct{}{}:
				default:
				}
			}
		}()
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	pidFile := filepath.Join(dataDir, "postmaster.pid")
	for {
		if ready(pidFile, pid) {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%w during start-up", ErrExited)
		case <-ctx.Done():
			return fmt.Errorf("wait for postgres to accept connections: %w", ctx.Err())
		case <-events:
		case <-tick.C:
		}
	}
}

// ready reports whether pidFile names pid and says "ready".
func ready(pidFile string, pid int) bool {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 8 {
		return false
	}
	p, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	return err == nil && p == pid && strings.TrimSpace(lines[7]) == "ready"
}

// watchDir returns an inotify descriptor watching dir for file changes, or nil.
func watchDir(dir string) *os.File {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CLOSE_WRITE|unix.IN_MODIFY|unix.IN_MOVED_TO|unix.IN_CREATE); err != nil {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), "inotify")
}

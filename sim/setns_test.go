package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// netnsPath is where `ip netns add` keeps a namespace's handle.
func netnsPath(ns string) string { return filepath.Join("/run/netns", ns) }

// inNetns runs f on an OS thread that has entered the network namespace ns, so
// that a socket f opens, or a process it starts, is in ns. Only the network
// namespace changes: processes started this way share the machine's mounts and
// process ids, as a node agent restarted on its host finds its host's mounts.
// The thread goes back to its own namespace before other goroutines may run on
// it; if it cannot, it stays locked and ends with f's goroutine.
func inNetns(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		goruntime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			goruntime.UnlockOSThread()
			errc <- fmt.Errorf("open this thread's namespace: %w", err)
			return
		}
		defer unix.Close(orig)
		fd, err := unix.Open(netnsPath(ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		if err != nil {
			goruntime.UnlockOSThread()
			errc <- fmt.Errorf("enter namespace %s: %w", ns, err)
			return
		}
		ferr := f()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("leave namespace %s: %w", ns, err))
			return // still locked: the runtime ends the thread
		}
		goruntime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// startIn starts cmd in the network namespace ns.
func startIn(ns string, cmd *exec.Cmd) error {
	return inNetns(ns, cmd.Start)
}

// dialFrom returns a dial function (pgx's DialFunc) whose connections start in
// the network namespace ns.
func dialFrom(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := inNetns(ns, func() error {
			var d net.Dialer
			var err error
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// netnsPIDs lists the processes whose network namespace is ns.
func netnsPIDs(ns string) []int {
	var want unix.Stat_t
	if err := unix.Stat(netnsPath(ns), &want); err != nil {
		return nil
	}
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &st) == nil && st.Ino == want.Ino && st.Dev == want.Dev {
			out = append(out, pid)
		}
	}
	return out
}

// procComm is a process's command name, for messages.
func procComm(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	if err != nil {
		return "gone"
	}
	return strings.TrimSpace(string(b))
}

// killPID sends SIGKILL to one process.
func killPID(pid int) { syscall.Kill(pid, syscall.SIGKILL) }

package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// osUser is the unprivileged account Postgres and PgBouncer run as.
type osUser struct {
	Name     string
	UID, GID int
}

func lookupUser(name string) (osUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return osUser{}, fmt.Errorf("OS user %q: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return osUser{Name: name, UID: uid, GID: gid}, nil
}

// chown gives path to u.
func (u osUser) chown(path string) error { return os.Chown(path, u.UID, u.GID) }

// proc is one long-running process this harness started. It runs in its own
// process group, so a Ctrl-C at the terminal reaches only the harness, which then
// stops it by PID. Safe for concurrent use.
type proc struct {
	name    string
	cmd     *exec.Cmd
	done    chan struct{}
	stopSig syscall.Signal
	logPath string
	once    sync.Once
	stopErr error
}

// startProc starts bin with args, as u when u is not nil, with stdout and stderr
// appended to logPath. stopSig is the signal that shuts it down cleanly.
func startProc(name string, u *osUser, env []string, stopSig syscall.Signal, logPath, bin string, args ...string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: open log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if u != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID)}
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), stopSig: stopSig, logPath: logPath}
	go func() {
		cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// pid is the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends the clean-shutdown signal to the process (by PID), waits up to
// 90 seconds, then kills it. Calling it again returns the first result.
func (p *proc) stop() error {
	p.once.Do(func() {
		if p.exited() {
			return
		}
		_ = syscall.Kill(p.pid(), p.stopSig)
		select {
		case <-p.done:
			if code := p.cmd.ProcessState.ExitCode(); code != 0 && p.stopSig != syscall.SIGKILL {
				p.stopErr = fmt.Errorf("%s (pid %d) exited with %d after %v (log %s)", p.name, p.pid(), code, p.stopSig, p.logPath)
			}
		case <-time.After(90 * time.Second):
			_ = syscall.Kill(p.pid(), syscall.SIGKILL)
			<-p.done
			p.stopErr = fmt.Errorf("%s (pid %d) did not stop within 90s of %v; killed", p.name, p.pid(), p.stopSig)
		}
	})
	return p.stopErr
}

// logTail returns the last n lines of the process's log.
func (p *proc) logTail(n int) string {
	b, _ := os.ReadFile(p.logPath)
	return tail(string(b), n)
}

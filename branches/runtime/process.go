package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Process runs Postgres as child processes of this one, as an unprivileged OS user.
// The zero value is not usable; call NewProcess. Safe for concurrent use.
type Process struct {
	bins Binaries
	user OSUser
	log  *zap.Logger
	dirs sync.Map // major version -> binaries directory found for it
}

// NewProcess returns a runtime that finds binaries with bins and runs them as u.
func NewProcess(bins Binaries, u OSUser, log *zap.Logger) *Process {
	return &Process{bins: bins, user: u, log: log}
}

// User is the OS user servers run as.
func (p *Process) User() OSUser { return p.user }

// Command returns a command for the Postgres program prog of the given major version,
// set up to run as the runtime's OS user in its own process group.
func (p *Process) Command(ctx context.Context, version, prog string, args ...string) (*exec.Cmd, error) {
	dir, err := p.binDir(version)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(dir, prog), args...)
	cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(p.user.UID), Gid: uint32(p.user.GID)},
		Setpgid:    true,
	}
	return cmd, nil
}

// binDir finds the binaries of a major version once: a lookup can run pg_config,
// which on Debian is a shell script that lists directories, and every server start
// would pay for it. A failed lookup is tried again next time.
func (p *Process) binDir(version string) (string, error) {
	if dir, ok := p.dirs.Load(version); ok {
		return dir.(string), nil
	}
	dir, err := p.bins.Find(version)
	if err != nil {
		return "", err
	}
	p.dirs.Store(version, dir)
	return dir, nil
}

// Start implements Runtime.
func (p *Process) Start(ctx context.Context, spec Spec) (Instance, error) {
	cmd, err := p.Command(context.Background(), spec.Version, "postgres", serverArgs(spec)...)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(cmd.Env, spec.Env...)
	cmd.Dir = spec.DataDir
	logf, err := os.OpenFile(spec.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open server log: %w", err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Start time is taken before the fork so that the postmaster.pid check below
	// cannot mistake a stale file for this server's.
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	inst := &proc{cmd: cmd, pid: cmd.Process.Pid, socket: filepath.Join(spec.SocketDir, ".s.PGSQL.5432"), done: make(chan struct{})}
	go func() {
		inst.waitErr = cmd.Wait()
		logf.Close()
		close(inst.done)
	}()
	if err := waitReady(ctx, spec.DataDir, inst.pid, inst.done); err != nil {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = inst.Stop(stopCtx)
		if errors.Is(err, ErrExited) {
			return nil, fmt.Errorf("%w: %s", err, LogTail(spec.LogFile, 5))
		}
		return nil, err
	}
	return inst, nil
}

// serverArgs is the postgres command line for spec: the runtime's settings, then the
// spec's own on top.
func serverArgs(spec Spec) []string {
	settings := map[string]string{
		"listen_addresses":          "",
		"unix_socket_directories":   spec.SocketDir,
		"unix_socket_permissions":   "0700",
		"port":                      "5432",
		"logging_collector":         "off",
		"recovery_init_sync_method": "syncfs",
	}
	if spec.Name != "" {
		settings["cluster_name"] = spec.Name
	}
	for k, v := range spec.Settings {
		settings[k] = v
	}
	args := []string{"-D", spec.DataDir}
	for _, k := range slices.Sorted(mapsKeys(settings)) {
		args = append(args, "-c", k+"="+settings[k])
	}
	return args
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// proc is a Postgres server started by Process.
type proc struct {
	cmd     *exec.Cmd
	pid     int
	socket  string
	done    chan struct{}
	waitErr error
}

func (p *proc) PID() int              { return p.pid }
func (p *proc) SocketPath() string    { return p.socket }
func (p *proc) Done() <-chan struct{} { return p.done }

// Stop sends SIGINT (fast shutdown: sessions are ended, a checkpoint is written),
// then SIGQUIT and SIGKILL to the process group if ctx ends before it exits.
func (p *proc) Stop(ctx context.Context) error {
	return stopPID(ctx, p.pid, p.done)
}

// Discard sends SIGQUIT (immediate shutdown), then SIGKILL to the process group if
// ctx ends before it exits.
func (p *proc) Discard(ctx context.Context) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = syscall.Kill(p.pid, syscall.SIGQUIT)
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
	}
	return killPID(p.pid, p.done)
}

// Reload sends SIGHUP to the postmaster.
func (p *proc) Reload() error {
	select {
	case <-p.done:
		return ErrExited
	default:
	}
	return syscall.Kill(p.pid, syscall.SIGHUP)
}

// stopPID stops the postmaster pid, whose exit is signalled by done.
func stopPID(ctx context.Context, pid int, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	default:
	}
	_ = syscall.Kill(pid, syscall.SIGINT)
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	_ = syscall.Kill(pid, syscall.SIGQUIT)
	select {
	case <-done:
		return fmt.Errorf("postgres %d needed an immediate shutdown", pid)
	case <-time.After(5 * time.Second):
	}
	return killPID(pid, done)
}

// killPID kills the postmaster pid and its process group and waits for done.
func killPID(pid int, done <-chan struct{}) error {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		return fmt.Errorf("postgres %d did not exit after SIGKILL", pid)
	}
	return fmt.Errorf("postgres %d had to be killed", pid)
}

// LogTail returns up to n last non-empty lines of a server log, joined by "; ".
func LogTail(path string, n int) string {
	if n <= 0 {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no server log)"
	}
	if len(b) > 16384 {
		b = b[len(b)-16384:]
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

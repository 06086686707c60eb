package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proxyServer is one `pgbranchproxy serve` on the harness's state directory.
type proxyServer struct {
	e      *env
	state  string
	addr   string
	sock   string // the --unix-socket-dir
	lazyrw bool
	proc   *proc
}

// startProxy starts serve on a free loopback port and waits for its port and
// admin socket.
func (e *env) startProxy(ctx context.Context, state string, lazyrw bool, extra ...string) (*proxyServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &proxyServer{e: e, state: state, addr: "127.0.0.1:" + strconv.Itoa(port), lazyrw: lazyrw,
		sock: filepath.Join(filepath.Dir(state), filepath.Base(state)+"-sock")}
	if err := os.MkdirAll(p.sock, 0o755); err != nil {
		return nil, err
	}
	args := []string{"--state-dir", state, "serve", "--listen", p.addr, "--auth", "trust", "--shim", e.shim, "--log-level", "warn",
		"--unix-socket-dir", p.sock}
	if !lazyrw {
		args = append(args, "--lazyrw=off")
	}
	args = append(args, extra...)
	name := "pgbranchproxy"
	if !lazyrw {
		name += "-eager"
	}
	if len(extra) > 0 {
		name += "-" + filepath.Base(state)
	}
	p.proc, err = startProc(name, nil, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"},
		syscall.SIGTERM, e.logPath(name), e.proxyBin, args...)
	if err != nil {
		return nil, err
	}
	e.cl.push(name, p.stop)
	sock := filepath.Join(state, "admin.sock")
	deadline := time.Now().Add(60 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", p.addr, time.Second); err == nil {
			c.Close()
			if _, err := os.Stat(sock); err == nil {
				return p, nil
			}
		}
		if p.proc.exited() {
			return nil, fmt.Errorf("pgbranchproxy exited during start-up:\n%s", p.proc.logTail(20))
		}
		if time.Now().After(deadline) {
			_ = p.stop()
			return nil, fmt.Errorf("pgbranchproxy did not start within 60s:\n%s", p.proc.logTail(20))
		}
		select {
		case <-ctx.Done():
			_ = p.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *proxyServer) stop() error {
	if p == nil || p.proc == nil {
		return nil
	}
	return p.proc.stop()
}

// dsn connects to db (DB@BRANCH) through the proxy.
func (p *proxyServer) dsn(db string) string {
	host, port, _ := net.SplitHostPort(p.addr)
	return fmt.Sprintf("host=%s port=%s user=postgres dbname=%s sslmode=disable", host, port, db)
}

// unixDSN connects to db through the proxy's unix socket.
func (p *proxyServer) unixDSN(db string) string {
	_, port, _ := net.SplitHostPort(p.addr)
	return fmt.Sprintf("host=%s port=%s user=postgres dbname=%s", p.sock, port, db)
}

// cli runs a CLI subcommand against this server and returns its output.
func (p *proxyServer) cli(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, p.e.proxyBin, append([]string{"--state-dir", p.state}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("pgbranchproxy %s: %w\n%s", strings.Join(args, " "), err, tail(string(out), 10))
	}
	return string(out), nil
}

// branchInfo is the part of `branch ls --json` the harness reads.
type branchInfo struct {
	Name       string `json:"name"`
	Source     string `json:"source"`
	State      string `json:"state"`
	CowMode    string `json:"cow_mode"`
	OwnedBytes int64  `json:"owned_bytes"`
	Sessions   int    `json:"sessions"`
	PID        int    `json:"pid"`
	CreateMS   int64  `json:"create_ms"`
}

// branches returns the proxy's listing (`branch ls --json`, with pool members when
// all is set).
func (p *proxyServer) branches(ctx context.Context, all bool) ([]branchInfo, error) {
	args := []string{"branch", "ls", "--json"}
	if all {
		args = append(args, "--all")
	}
	out, err := p.cli(ctx, args...)
	if err != nil {
		return nil, err
	}
	var list []branchInfo
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	return list, nil
}

// branch returns the listing of one branch.
func (p *proxyServer) branch(ctx context.Context, name string) (branchInfo, error) {
	list, err := p.branches(ctx, false)
	if err != nil {
		return branchInfo{}, err
	}
	for _, b := range list {
		if b.Name == name {
			return b, nil
		}
	}
	return branchInfo{}, fmt.Errorf("branch %q not listed", name)
}

// destroyBranches destroys every branch the proxy lists (pool members are not
// listed), so that what an earlier phase left running does not weigh on the next.
func (p *proxyServer) destroyBranches(ctx context.Context) error {
	list, err := p.branches(ctx, false)
	if err != nil {
		return err
	}
	for _, b := range list {
		if _, err := p.waitIdle(ctx, b.Name); err != nil { // destroy refuses a branch in use
			return err
		}
		if _, err := p.cli(ctx, "branch", "destroy", b.Name, "--source", b.Source, "--if-exists"); err != nil {
			return err
		}
	}
	return nil
}

// waitIdle waits until the proxy has noticed that the branch's sessions ended, so
// that stop, reset and destroy (which refuse busy branches) can be timed alone.
// It returns the branch's listing.
func (p *proxyServer) waitIdle(ctx context.Context, name string) (branchInfo, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := p.branch(ctx, name)
		if err != nil {
			return b, err
		}
		if b.Sessions == 0 {
			return b, nil
		}
		if time.Now().After(deadline) {
			return b, fmt.Errorf("branch %q still has %d sessions after 30s", name, b.Sessions)
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return b, err
		}
	}
}

// branchSocket finds the unix socket directory and port of a running branch's
// server from its postmaster's command line (-c unix_socket_directories=…).
func branchSocket(pid int) (dir string, port int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "", 0, fmt.Errorf("branch server %d: %w", pid, err)
	}
	port = 5432
	for _, a := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(a, "unix_socket_directories="); ok {
			dir = strings.Split(v, ",")[0]
		}
		if v, ok := strings.CutPrefix(a, "port="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				port = n
			}
		}
	}
	if dir == "" {
		return "", 0, fmt.Errorf("branch server %d: no unix_socket_directories in its command line", pid)
	}
	return dir, port, nil
}

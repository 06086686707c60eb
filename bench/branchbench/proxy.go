package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proxy is one `pgbranchproxy serve` this run started, on its own state directory.
type proxy struct {
	bin, state, addr string
	cmd              *exec.Cmd
	done             chan struct{}
	logPath          string
	admin            *http.Client
}

// startProxy starts serve on a free loopback port with the lifecycle flags the run
// uses and waits for its port and admin socket.
func startProxy(ctx context.Context, cfg config, root string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &proxy{bin: filepath.Join(cfg.binDir, "pgbranchproxy"), state: filepath.Join(root, "state"), addr: addr,
		done: make(chan struct{}), logPath: filepath.Join(root, "pgbranchproxy.log")}
	sock := filepath.Join(p.state, "admin.sock")
	p.admin = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}, MaxIdleConnsPerHost: 16}}
	args := []string{"--state-dir", p.state, "serve", "--listen", addr, "--auth", "trust",
		"--shim", filepath.Join(cfg.binDir, "liblazyrw.so"), "--log-level", "warn",
		"--idle-stop", cfg.idleStop.String(), "--reap-interval", "1s",
		"--max-running", strconv.Itoa(cfg.maxRunning), "--max-creating", strconv.Itoa(cfg.concurrency)}
	logf, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(p.bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start pgbranchproxy: %w", err)
	}
	go func() { p.cmd.Wait(); logf.Close(); close(p.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			if _, err := os.Stat(sock); err == nil {
				return p, nil
			}
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("pgbranchproxy exited during start-up:\n%s", p.logTail(20))
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("pgbranchproxy did not start within 60s:\n%s", p.logTail(20))
		}
	}
}

// stop sends SIGTERM (by PID), waits up to 2 minutes, then kills the process.
func (p *proxy) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			return fmt.Errorf("pgbranchproxy exited with %d (log %s)", code, p.logPath)
		}
		return nil
	case <-time.After(2 * time.Minute):
		_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("pgbranchproxy did not stop within 2m of SIGTERM; killed")
	}
}

func (p *proxy) logTail(n int) string {
	b, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// dsn connects to database db on branch through the proxy; options go to the
// startup's options parameter.
func (p *proxy) dsn(db, branch, options string) string {
	host, port, _ := net.SplitHostPort(p.addr)
	s := fmt.Sprintf("host=%s port=%s user=postgres dbname=%s@%s sslmode=disable connect_timeout=300", host, port, db, branch)
	if options != "" {
		s += " options='" + options + "'"
	}
	return s
}

// addSource seeds source name from the SQL file through the CLI.
func (p *proxy) addSource(ctx context.Context, name, sqlFile string) error {
	cmd := exec.CommandContext(ctx, p.bin, "--state-dir", p.state, "source", "add", name, "--from-sql", sqlFile, "--database", name)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("source add: %w\n%s", err, out)
	}
	return nil
}

// destroy destroys branch through the admin API, retrying while the proxy has not
// yet seen the branch's last session end (409).
func (p *proxy) destroy(ctx context.Context, branch string) error {
	for delay := 5 * time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, "http://admin/v1/branches/"+url.PathEscape(branch), nil)
		resp, err := p.admin.Do(req)
		if err != nil {
			return fmt.Errorf("destroy %s: %w", branch, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode < 300:
			return nil
		case resp.StatusCode != http.StatusConflict:
			return fmt.Errorf("destroy %s: %s: %s", branch, resp.Status, strings.TrimSpace(string(body)))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// branchInfo is the part of GET /v1/branches the run reads.
type branchInfo struct {
	Name       string `json:"name"`
	State      string `json:"state"`
	OwnedBytes int64  `json:"owned_bytes"`
}

// branches lists every branch with its owned bytes, measured now.
func (p *proxy) branches(ctx context.Context) ([]branchInfo, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://admin/v1/branches", nil)
	resp, err := p.admin.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []branchInfo
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("list branches: %w", err)
	}
	return out, nil
}

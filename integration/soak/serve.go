package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// serve is the pgbranchproxy serve process under test.
type serve struct {
	c       config
	state   string
	addr    string
	metrics string
	cmd     *exec.Cmd
	exited  chan struct{}
	admin   *http.Client
	logMu   sync.Mutex
	logTail []string
	logFile *os.File
	once    sync.Once
	stopErr error
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startServe starts serve on state and waits for its admin socket.
func startServe(ctx context.Context, c config, state string) (*serve, error) {
	s := &serve{c: c, state: state, exited: make(chan struct{})}
	var err error
	if s.addr, err = freeAddr(); err != nil {
		return nil, err
	}
	if s.metrics, err = freeAddr(); err != nil {
		return nil, err
	}
	s.cmd = exec.Command(c.bin, "--state-dir", state, "serve", "--listen", s.addr, "--metrics-listen", s.metrics,
		"--auth", "trust", "--shim", c.shim, "--reap-interval", "1s", "--idle-stop", c.idleStop.String(),
		// Parked server sessions retire on the soak's compressed time scale too, so
		// their descriptors level off within a short run.
		"--server-idle-timeout", "5s")
	if s.logFile, err = os.Create(filepath.Join(filepath.Dir(state), "serve.log")); err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	s.cmd.Stdout, s.cmd.Stderr = io.MultiWriter(pw, s.logFile), io.MultiWriter(pw, s.logFile)
	go s.keepLog(pr)
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.cmd.Wait(); pw.Close(); close(s.exited) }()
	sock := filepath.Join(state, "admin.sock")
	s.admin = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	for deadline := time.Now().Add(time.Minute); ; {
		if _, err := os.Stat(sock); err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("serve exited during start-up:\n%s", s.tail())
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("serve did not start in a minute:\n%s", s.tail())
		}
	}
}

// keepLog keeps serve's last lines for error reports, and its error lines.
func (s *serve) keepLog(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		s.logMu.Lock()
		s.logTail = append(s.logTail, sc.Text())
		if len(s.logTail) > 200 {
			s.logTail = s.logTail[len(s.logTail)-200:]
		}
		s.logMu.Unlock()
	}
}

func (s *serve) tail() string {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return strings.Join(s.logTail, "\n")
}

// stop sends SIGTERM and waits for a clean exit.
func (s *serve) stop() error {
	s.once.Do(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
			if code := s.cmd.ProcessState.ExitCode(); code != 0 {
				s.stopErr = fmt.Errorf("serve exited with %d after SIGTERM:\n%s", code, s.tail())
			}
		case <-time.After(3 * time.Minute):
			s.cmd.Process.Kill()
			<-s.exited
			s.stopErr = fmt.Errorf("serve did not stop within 3 minutes of SIGTERM:\n%s", s.tail())
		}
	})
	return s.stopErr
}

// seed adds the source "soak": one table where every client keeps its rows.
func (s *serve) seed(ctx context.Context, file string) error {
	sql := "CREATE TABLE rows (client int NOT NULL, seq int NOT NULL, val text NOT NULL, PRIMARY KEY (client, seq));\n"
	if err := os.WriteFile(file, []byte(sql), 0o644); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, s.c.bin, "--state-dir", s.state, "source", "add", "soak", "--from-sql", file).CombinedOutput()
	if err != nil {
		return fmt.Errorf("source add: %v\n%s", err, out)
	}
	return nil
}

// dsn is the connection string for database soak in branch.
func (s *serve) dsn(branch string, extra ...string) string {
	host, port, _ := net.SplitHostPort(s.addr)
	return strings.Join(append([]string{"host=" + host, "port=" + port, "user=postgres", "dbname=soak@" + branch,
		"sslmode=disable", "connect_timeout=90", "application_name=soak"}, extra...), " ")
}

// branchInfo is the part of GET /v1/branches the soak reads.
type branchInfo struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Sessions int    `json:"sessions"`
}

func (s *serve) list(ctx context.Context) ([]branchInfo, error) {
	var out []branchInfo
	err := s.call(ctx, http.MethodGet, "/v1/branches", &out)
	return out, err
}

// call makes an admin API request; a non-2xx answer is an *apiError.
func (s *serve) call(ctx context.Context, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://pgbranchproxy"+path, nil)
	if err != nil {
		return err
	}
	resp, err := s.admin.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &apiError{status: resp.StatusCode, body: strings.TrimSpace(string(body))}
	}
	if out != nil {
		return json.Unmarshal(body, out)
	}
	return nil
}

type apiError struct {
	status int
	body   string
}

func (e *apiError) Error() string { return fmt.Sprintf("admin API: %d %s", e.status, e.body) }

// quiesce waits, after the load, for the ephemeral branches to go and checks that
// what runs agrees with what the catalog says runs.
func (s *serve) quiesce(ctx context.Context, l *load) []string {
	var problems []string
	// Ephemeral branches go by the reaper, whose pass runs its actions one after
	// another: on a loaded machine a destroy can wait behind many idle stops.
	start, deadline := time.Now(), time.Now().Add(3*time.Minute)
	for {
		list, err := s.list(ctx)
		if err != nil {
			return append(problems, "list branches after the load: "+err.Error())
		}
		running, eph, busy := 0, 0, 0
		var ephs []string
		for _, b := range list {
			if b.State == "running" {
				running++
			}
			if strings.HasPrefix(b.Name, "eph-") {
				eph++
				ephs = append(ephs, b.Name+" "+b.State)
			}
			busy += b.Sessions
		}
		mounts, pms := countMounts(s.state), len(postmastersUnder(s.state))
		if eph == 0 && busy == 0 && mounts == running && pms == running {
			fmt.Printf("soak: quiet %s after the load\n", time.Since(start).Round(time.Second))
			return problems
		}
		if time.Now().After(deadline) {
			return append(problems, fmt.Sprintf("3 minutes after the load: %d ephemeral branches left %v, %d sessions, %d running branches, %d mounts, %d postmasters",
				eph, ephs, busy, running, mounts, pms))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// leftovers lists mounts and postmasters left under the state directory once serve
// has stopped.
func (s *serve) leftovers() []string {
	var out []string
	for _, m := range mountsUnder(s.state) {
		out = append(out, "mount left after serve stopped: "+m)
		syscall.Unmount(m, syscall.MNT_DETACH)
	}
	for _, pid := range postmastersUnder(s.state) {
		out = append(out, fmt.Sprintf("postmaster %d left running after serve stopped", pid))
		syscall.Kill(pid, syscall.SIGQUIT)
	}
	return out
}

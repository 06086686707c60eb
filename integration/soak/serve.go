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

// serve is one pgbranchproxy serve process under test: the single server, a node
// or a front. A front has no admin socket (admin is nil).
type serve struct {
	name    string // serve, node1, front2: in reports and log file names
	bin     string
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

// startServe runs `bin --state-dir state serve --listen … --metrics-listen … args…`,
// its output in log, and waits until it listens (and, with admin, until its admin
// socket is there).
func startServe(ctx context.Context, name, bin, state, log string, admin bool, args ...string) (*serve, error) {
	s := &serve{name: name, bin: bin, state: state, exited: make(chan struct{})}
	var err error
	if s.addr, err = freeAddr(); err != nil {
		return nil, err
	}
	if s.metrics, err = freeAddr(); err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, append([]string{"--state-dir", state, "serve", "--listen", s.addr, "--metrics-listen", s.metrics}, args...)...)
	if s.logFile, err = os.Create(log); err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	s.cmd.Stdout, s.cmd.Stderr = io.MultiWriter(pw, s.logFile), io.MultiWriter(pw, s.logFile)
	go s.keepLog(pr)
	if err := s.cmd.Start(); err != nil {
		s.logFile.Close()
		return nil, err
	}
	go func() { s.cmd.Wait(); pw.Close(); s.logFile.Close(); close(s.exited) }()
	sock := filepath.Join(state, "admin.sock")
	if admin {
		s.admin = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			}}}
	}
	ready := func() bool {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		_, err = os.Stat(sock)
		return !admin || err == nil
	}
	for deadline := time.Now().Add(time.Minute); !ready(); {
		select {
		case <-s.exited:
			return nil, fmt.Errorf("%s exited during start-up:\n%s", name, s.tail())
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%s did not start in a minute:\n%s", name, s.tail())
		}
	}
	return s, nil
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
				s.stopErr = fmt.Errorf("%s exited with %d after SIGTERM:\n%s", s.name, code, s.tail())
			}
		case <-time.After(3 * time.Minute):
			s.cmd.Process.Kill()
			<-s.exited
			s.stopErr = fmt.Errorf("%s did not stop within 3 minutes of SIGTERM:\n%s", s.name, s.tail())
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
	out, err := exec.CommandContext(ctx, s.bin, "--state-dir", s.state, "source", "add", "soak", "--from-sql", file).CombinedOutput()
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
	Source   string `json:"source"`
	State    string `json:"state"`
	Sessions int    `json:"sessions"`
}

// list lists the branches the process holds (with all, warm pool members too).
func (s *serve) list(ctx context.Context, all bool) ([]branchInfo, error) {
	path := "/v1/branches"
	if all {
		path += "?all=true"
	}
	var out []branchInfo
	err := s.call(ctx, http.MethodGet, path, &out)
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

// leftovers lists mounts and postmasters left under the state directory once the
// process has stopped, and removes them.
func (s *serve) leftovers() []string {
	var out []string
	for _, m := range mountsUnder(s.state) {
		out = append(out, fmt.Sprintf("mount left after %s stopped: %s", s.name, m))
		syscall.Unmount(m, syscall.MNT_DETACH)
	}
	for _, pid := range postmastersUnder(s.state) {
		out = append(out, fmt.Sprintf("postmaster %d left running after %s stopped", pid, s.name))
		syscall.Kill(pid, syscall.SIGQUIT)
	}
	return out
}

package sim

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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
)

// member is one `pgbranchproxy serve` of the simulation, a node or a front, run
// on its host. Its output goes to a log file that failure messages quote.
type member struct {
	name   string // its cluster name: node-1, front-2
	host   *host
	addr   string // host:port it listens on
	state  string // its --state-dir
	args   []string
	extra  []string // flags a scenario adds for a while (cluster.restartNodes)
	node   bool
	dialer func(context.Context, string, string) (net.Conn, error) // from the client host
	log    string
	// freezer, when set, is the cgroup the process is started in (M8).
	freezer *freezer

	cmd    *exec.Cmd
	exited chan struct{}
}

// start starts the process on its host and waits until it listens (and, for a
// node, until its admin socket is there).
func (m *member) start(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(m.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "---- start %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(binPath, append(slices.Clip(m.args), m.extra...)...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := startIn(m.host.ns, cmd); err != nil {
		t.Fatalf("start %s: %v", m.name, err)
	}
	if m.freezer != nil {
		// Before it has forked anything: it registers in the catalog first.
		if err := m.freezer.add(cmd.Process.Pid); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%s into its freezer cgroup: %v", m.name, err)
		}
	}
	m.cmd, m.exited = cmd, make(chan struct{})
	exited := m.exited
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for !m.ready() {
		select {
		case <-exited:
			t.Fatalf("%s exited during start-up:\n%s", m.name, m.tail())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start within 60s:\n%s", m.name, m.tail())
		}
	}
}

// ready reports whether the member accepts connections from the client host.
func (m *member) ready() bool {
	if m.node {
		if _, err := os.Stat(filepath.Join(m.state, "admin.sock")); err != nil {
			return false
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := m.dialer(ctx, "tcp", m.addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// running reports whether the process is there.
func (m *member) running() bool {
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and expects a clean exit.
func (m *member) stop(t *testing.T) {
	if !m.running() {
		return
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
		if code := m.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("%s exited with %d after SIGTERM:\n%s", m.name, code, m.tail())
		}
	case <-time.After(90 * time.Second):
		m.cmd.Process.Kill()
		<-m.exited
		t.Errorf("%s did not stop within 90s of SIGTERM:\n%s", m.name, m.tail())
	}
}

// waitExit waits up to within for the process to exit on its own and returns
// its exit code; ok is false if it still runs.
func (m *member) waitExit(within time.Duration) (code int, ok bool) {
	select {
	case <-m.exited:
		return m.cmd.ProcessState.ExitCode(), true
	case <-time.After(within):
		return 0, false
	}
}

// kill9 kills the process with SIGKILL, as a crash would: a node's branch
// servers keep running.
func (m *member) kill9() {
	m.cmd.Process.Kill()
	<-m.exited
}

// tail is the end of the member's log.
func (m *member) tail() string { return readTail(m.log, 40) }

// cli runs a CLI command against a node's admin socket.
func (m *member) cli(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(binPath, append([]string{"--state-dir", m.state}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: pgbranchproxy %s: %v\n%s\n%s", m.name, strings.Join(args, " "), err, out, m.tail())
	}
	return string(out)
}

// branches lists the node's own branches by name.
func (m *member) branches(t *testing.T) map[string]branches.Info {
	t.Helper()
	var list []branches.Info
	if err := json.Unmarshal([]byte(m.cli(t, "branch", "ls", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]branches.Info{}
	for _, b := range list {
		out[b.Name] = b
	}
	return out
}

// creates is the node's count of branch creations.
func (m *member) creates(t *testing.T) int { return m.actions(t, "create", "") }

// actions is the node's count of the branch actions action (create, stop,
// destroy) for reason (any with ""), from its metrics.
func (m *member) actions(t *testing.T, action, reason string) int {
	t.Helper()
	resp, err := m.admin().Get("http://admin/metrics")
	if err != nil {
		t.Fatalf("%s metrics: %v", m.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s metrics: %s %v", m.name, resp.Status, err)
	}
	prefix := `pgbranch_branch_actions_total{action="` + action + `",reason="` + reason
	if reason != "" {
		prefix += `"`
	}
	n := 0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("%s metrics: %q: %v", m.name, line, err)
		}
		n += int(v)
	}
	return n
}

// destroy destroys the node's branch name of source app through its admin API.
func (m *member) destroy(ctx context.Context, name string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, "http://admin/v1/branches/"+url.PathEscape(name)+"?source=app", nil)
	if err != nil {
		return err
	}
	resp, err := m.admin().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("destroy %s on %s: %s %s", name, m.name, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// admin is an HTTP client of the node's admin socket.
func (m *member) admin() *http.Client {
	sock := filepath.Join(m.state, "admin.sock")
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
}

package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/internal/testbuild"
)

var (
	binPath  string // the pgbranchproxy binary under test
	shimPath string // liblazyrw.so
)

func TestMain(m *testing.M) {
	// -short runs unit tests only; everything here needs root and real Postgres.
	flag.Parse()
	if testing.Short() {
		fmt.Println("integration: skipped with -short")
		os.Exit(0)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "integration tests need root (OverlayFS mounts, Postgres as another user); run them as root or with -short")
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "pgbranch-bin-")
	if err != nil {
		panic(err)
	}
	os.Chmod(dir, 0o755)
	// INTEGRATION_RACE=1: the server under test is built with the race detector; a
	// race makes it exit non-zero, which stop reports.
	if binPath, err = testbuild.Binary(dir, os.Getenv("INTEGRATION_RACE") == "1"); err == nil {
		shimPath, err = testbuild.Shim(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := startCatalogServer(); err != nil {
		fmt.Fprintf(os.Stderr, "start the catalog server: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := stopCatalogServer(); err != nil {
		fmt.Fprintf(os.Stderr, "stop the catalog server: %v\n", err)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is one running `pgbranchproxy serve` on a private state directory.
type server struct {
	t        testing.TB
	state    string
	addr     string
	args     []string
	under    []string // a command serve runs under (prlimit …), or none
	cmd      *exec.Cmd
	exited   chan struct{}
	logMu    sync.Mutex
	log      bytes.Buffer
	stateDir string
}

// newStateDir makes a state directory the Postgres user can traverse to.
func newStateDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "pgbranch-it-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o711)
	t.Cleanup(func() {
		assertNoContainers(t, dir)
		assertNothingLeft(t, dir)
		os.RemoveAll(dir)
	})
	return filepath.Join(dir, "state")
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServer starts serve with extra flags and waits for its admin socket.
func startServer(t testing.TB, state string, extra ...string) *server {
	t.Helper()
	return startServerUnder(t, nil, state, extra...)
}

// startServerUnder starts serve as startServer does, run by the command under
// (which must exec it, as prlimit does, so that signals reach serve).
func startServerUnder(t testing.TB, under []string, state string, extra ...string) *server {
	t.Helper()
	s := &server{t: t, state: state, addr: freeAddr(t), stateDir: state, under: under}
	s.args = append([]string{"--state-dir", state, "serve", "--listen", s.addr, "--shim", shimPath}, extra...)
	if !slices.Contains(extra, "--auth") {
		s.args = append(s.args, "--auth", "trust")
	}
	if r := os.Getenv("INTEGRATION_RELAY"); r != "" && !slices.Contains(extra, "--relay") {
		// INTEGRATION_RELAY=kernel runs every test's sessions on that relay.
		s.args = append(s.args, "--relay", r)
	}
	s.args = append(s.args, runtimeArgs(extra)...)
	s.args = append(s.args, catalogArgs(t, state, extra)...)
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *server) start() {
	s.t.Helper()
	s.cmd = exec.Command(binPath, s.args...)
	if len(s.under) > 0 {
		s.cmd = exec.Command(s.under[0], append(append(s.under[1:len(s.under):len(s.under)], binPath), s.args...)...)
	}
	pr, pw := io.Pipe()
	s.cmd.Stdout, s.cmd.Stderr = pw, pw
	s.exited = make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			s.logMu.Lock()
			s.log.Write(sc.Bytes())
			s.log.WriteByte('\n')
			s.logMu.Unlock()
		}
	}()
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	go func() { s.cmd.Wait(); pw.Close(); close(s.exited) }()
	sock := filepath.Join(s.state, "admin.sock")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("tcp", s.addr); err == nil {
			c.Close()
			if _, err := os.Stat(sock); err == nil {
				return
			}
		}
		select {
		case <-s.exited:
			s.t.Fatalf("serve exited during start-up:\n%s", s.logs())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("serve did not start:\n%s", s.logs())
		}
	}
}

func (s *server) logs() string {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return s.log.String()
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.exited:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	defer checkCatalogBackend(s.t, s.state, s.args)
	select {
	case <-s.exited:
		if code := s.cmd.ProcessState.ExitCode(); code != 0 {
			s.t.Errorf("serve exited with %d after SIGTERM:\n%s", code, s.logs())
		}
	case <-time.After(90 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		s.t.Errorf("serve did not stop within 90s of SIGTERM:\n%s", s.logs())
	}
}

// kill9 kills serve without letting it clean up; its branch servers keep running.
func (s *server) kill9() {
	s.cmd.Process.Kill()
	<-s.exited
}

// cli runs a CLI subcommand against this server.
func (s *server) cli(args ...string) (string, error) {
	cmd := exec.Command(binPath, append([]string{"--state-dir", s.state}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (s *server) mustCLI(args ...string) string {
	s.t.Helper()
	out, err := s.cli(args...)
	if err != nil {
		s.t.Fatalf("pgbranchproxy %s: %v\n%s\nserver log:\n%s", strings.Join(args, " "), err, out, s.logs())
	}
	return out
}

// branchInfo is what branch ls --json prints for one branch.
type branchInfo = branches.Info

func (s *server) branches() map[string]branchInfo {
	s.t.Helper()
	var list []branchInfo
	if err := json.Unmarshal([]byte(s.mustCLI("branch", "ls", "--json")), &list); err != nil {
		s.t.Fatal(err)
	}
	out := map[string]branchInfo{}
	for _, b := range list {
		out[b.Name] = b
	}
	return out
}

// dsn is a key/value connection string for db (e.g. "app@feature").
func (s *server) dsn(db string, extra ...string) string {
	host, port, _ := net.SplitHostPort(s.addr)
	return strings.Join(append([]string{"host=" + host, "port=" + port, "user=postgres", "dbname=" + db, "sslmode=disable"}, extra...), " ")
}

func (s *server) connect(t testing.TB, db string, extra ...string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.dsn(db, extra...))
	if err != nil {
		t.Fatalf("connect %s: %v\nserver log:\n%s", db, err, s.logs())
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// connectErr tries to connect and returns the error, closing any connection.
func (s *server) connectErr(db string, extra ...string) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.dsn(db, extra...))
	if err == nil {
		c.Close(ctx)
	}
	return nil, err
}

// psql runs psql against the proxy and returns its unaligned output.
func (s *server) psql(t testing.TB, db, sql string) (string, error) {
	t.Helper()
	cmd := exec.Command("psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", s.dsn(db), "-c", sql)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// seedSQL writes sql to a file and adds it as source name (database name).
func (s *server) seedSQL(name, sql string) {
	s.t.Helper()
	f := filepath.Join(filepath.Dir(s.state), name+".sql")
	if err := os.WriteFile(f, []byte(sql), 0o644); err != nil {
		s.t.Fatal(err)
	}
	s.mustCLI("source", "add", name, "--from-sql", f)
}

// assertNothingLeft checks that no mount and no postmaster of dir survive.
func assertNothingLeft(t testing.TB, dir string) {
	t.Helper()
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			t.Errorf("mount left behind: %s", f[4])
			syscall.Unmount(f[4], syscall.MNT_DETACH)
		}
	}
	for _, pid := range postmastersUnder(dir) {
		t.Errorf("postmaster %d left running on %s", pid, dir)
		syscall.Kill(pid, syscall.SIGQUIT)
	}
}

// postmastersUnder lists postmasters whose -D is under dir.
func postmastersUnder(dir string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-D" && strings.HasPrefix(args[i+1], dir+"/") {
				out = append(out, pid)
			}
		}
	}
	return out
}

package catalogtest

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"go.uber.org/zap"
)

// Server is a Postgres 15 server in a temporary directory, reachable on a unix
// socket there with trust authentication as user postgres. The zero value is not
// usable; call Start. NewDatabase and URL are safe for concurrent use; Pause,
// Resume and Stop are not.
type Server struct {
	dir  string
	p    *runtime.Process
	spec runtime.Spec
	inst runtime.Instance
	n    atomic.Int64
}

// Start initdbs a cluster in a new temporary directory and starts it.
func Start(ctx context.Context) (*Server, error) {
	u, err := runtime.LookupUser("postgres")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "catalogtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	if err := s.start(ctx, u); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context, u runtime.OSUser) error {
	if err := os.Chmod(s.dir, 0o711); err != nil {
		return err
	}
	data, run := filepath.Join(s.dir, "data"), filepath.Join(s.dir, "run")
	for _, d := range []string{data, run} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
		if err := os.Chown(d, u.UID, u.GID); err != nil {
			return err
		}
	}
	s.p = runtime.NewProcess(runtime.Binaries{}, u, zap.NewNop())
	var out bytes.Buffer
	if err := s.p.Run(ctx, runtime.Job{Version: "15", Prog: "initdb", Stdout: &out, Paths: []string{data},
		Args: []string{"-D", data, "-U", "postgres", "-A", "trust", "--no-sync"}}); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out.String())
	}
	s.spec = runtime.Spec{Name: "catalogtest", Version: "15", DataDir: data, SocketDir: run,
		LogFile:  filepath.Join(s.dir, "server.log"),
		Settings: map[string]string{"fsync": "off", "shared_buffers": "16MB", "max_connections": "200"}}
	return s.Resume(ctx)
}

// Pause stops the server (a clean, fast shutdown) and keeps its data: clients see
// the catalog go away until Resume.
func (s *Server) Pause(ctx context.Context) error {
	if s.inst == nil {
		return nil
	}
	err := s.inst.Stop(ctx)
	s.inst = nil
	return err
}

// Kill kills the postmaster with SIGKILL, as a crash or the OOM killer would, and
// waits until it and its children are gone: clients see their connections end
// without a goodbye and new ones refused, until Resume.
func (s *Server) Kill() error {
	if s.inst == nil {
		return nil
	}
	pid := s.inst.PID()
	children := childrenOf(pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill the catalog test server: %w", err)
	}
	<-s.inst.Done()
	s.inst = nil
	// The backends notice their postmaster's death and exit; until they have, a new
	// postmaster refuses the shared memory they still hold.
	deadline := time.Now().Add(time.Minute)
	for _, c := range children {
		for alive(c) {
			if time.Now().After(deadline) {
				return fmt.Errorf("backend %d of the killed catalog test server still runs", c)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its ")".
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}

func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z" // a zombie has exited
}

// Resume starts the server again on its data after Pause or Kill.
func (s *Server) Resume(ctx context.Context) error {
	inst, err := s.p.Start(ctx, s.spec)
	if err != nil {
		return fmt.Errorf("start catalog test server: %w", err)
	}
	s.inst = inst
	return nil
}

// URL is the postgres:// URL of database db on the server.
func (s *Server) URL(db string) string {
	return "postgres:///" + db + "?host=" + filepath.Join(s.dir, "run") + "&user=postgres"
}

// NewDatabase creates an empty database with a name of its own and returns its URL.
func (s *Server) NewDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("catalog_%d", s.n.Add(1))
	admin, err := sql.Open("pgx", s.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return s.URL(name), nil
}

// Stop stops the server and removes its directory.
func (s *Server) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := s.Pause(ctx)
	if rerr := os.RemoveAll(s.dir); err == nil {
		err = rerr
	}
	return err
}

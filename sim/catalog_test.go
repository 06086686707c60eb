package sim

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	brt "github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"go.uber.org/zap"
)

// catalogServer is the shared catalog: a Postgres 15 server run as OS user
// postgres on its own host, reached over TCP by nodes and fronts, and by the
// test over its unix socket (a path, which no network namespace hides).
type catalogServer struct {
	host   *host
	dir    string
	data   string       // its data directory
	run    string       // its unix socket's directory
	proc   *brt.Process // runs its programs as OS user postgres
	args   []string     // of its postgres
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
	local  string  // the test's URL of database postgres, over the unix socket
	url    string  // for nodes and fronts, over the simulated network
	db     *sql.DB // the test's own connection, over the unix socket
}

const catalogDB = "pgbsim"

// startCatalog initdbs a cluster under dir and starts it on h, listening on h's
// address only, with trust for the simulation's subnet. It is stopped when the
// test ends.
func startCatalog(t *testing.T, ctx context.Context, dir string, h *host, subnet string) *catalogServer {
	t.Helper()
	u, err := brt.LookupUser("postgres")
	if err != nil {
		t.Fatal(err)
	}
	c := &catalogServer{host: h, dir: dir}
	data, run := filepath.Join(dir, "data"), filepath.Join(dir, "run")
	c.data, c.run = data, run
	for _, d := range []string{dir, data, run} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, u.UID, u.GID); err != nil {
			t.Fatal(err)
		}
	}
	p := brt.NewProcess(brt.Binaries{}, u, zap.NewNop())
	var out bytes.Buffer
	if err := p.Run(ctx, brt.Job{Version: "15", Prog: "initdb", Stdout: &out,
		Args: []string{"-D", data, "-U", "postgres", "-A", "trust", "--no-sync"}}); err != nil {
		t.Fatalf("initdb the catalog: %v\n%s", err, out.String())
	}
	hba, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		// replication: M10's standby streams from it over the simulated network.
		_, err = fmt.Fprintf(hba, "host all postgres %s trust\nhost replication postgres %s trust\n", subnet, subnet)
		if cerr := hba.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	c.args = []string{"-D", data,
		"-c", "listen_addresses=" + h.addr.String(), "-c", "port=5432", "-c", "unix_socket_directories=" + run,
		"-c", "fsync=off", "-c", "shared_buffers=32MB", "-c", "max_connections=300",
		// M14 counts the nodes' and fronts' statements (CREATE EXTENSION in database postgres).
		"-c", "shared_preload_libraries=pg_stat_statements"}
	c.proc, c.log = p, filepath.Join(dir, "catalog.log")
	if err := c.launch(); err != nil {
		t.Fatalf("start the catalog: %v", err)
	}
	t.Cleanup(func() { c.stop(t) })
	c.local = "postgres:///postgres?host=" + run + "&user=postgres"
	if err := waitPostgres(ctx, c.local, c.exited); err != nil {
		t.Fatalf("the catalog did not start: %v\n%s", err, readTail(c.log, 20))
	}
	admin, err := sql.Open("pgx", c.local)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+catalogDB); err != nil {
		t.Fatal(err)
	}
	if c.db, err = sql.Open("pgx", "postgres:///"+catalogDB+"?host="+run+"&user=postgres"); err != nil {
		t.Fatal(err)
	}
	c.url = "postgres://postgres@" + net.JoinHostPort(h.addr.String(), "5432") + "/" + catalogDB + "?sslmode=disable"
	return c
}

// launch starts the server's postgres on its host, its output appended to its log.
func (c *catalogServer) launch() error {
	cmd, err := c.proc.Command(context.Background(), "15", "postgres", c.args...)
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(c.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := startIn(c.host.ns, cmd); err != nil {
		return err
	}
	exited := make(chan struct{})
	c.cmd, c.exited = cmd, exited
	go func() { cmd.Wait(); close(exited) }()
	return nil
}

// crash stops the server as `pg_ctl stop -m immediate` does (SIGQUIT to its
// postmaster: every backend exits at once, without a checkpoint, and
// connections are reset) and waits for its exit.
func (c *catalogServer) crash(t *testing.T) {
	t.Helper()
	c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the catalog (postmaster %d) did not exit within 30s of SIGQUIT", c.cmd.Process.Pid)
	}
}

// restart starts the server again after crash (it recovers from its WAL) and
// waits until it answers the test's pool, whose connections died with it.
func (c *catalogServer) restart(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := c.launch(); err != nil {
		t.Fatalf("start the catalog again: %v", err)
	}
	if err := waitPostgres(ctx, c.local, c.exited); err != nil {
		t.Fatalf("the catalog did not start again: %v\n%s", err, readTail(c.log, 20))
	}
	// Each query that finds a dead connection drops it from the pool.
	for range 10 {
		if _, err := c.db.ExecContext(ctx, "SELECT 1"); err == nil {
			return
		}
	}
	t.Fatalf("the catalog answers, but not the test's pool")
}

// waitPostgres waits until a server answers at url, or exited is closed.
func waitPostgres(ctx context.Context, url string, exited <-chan struct{}) error {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if err = db.PingContext(ctx); err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("postgres exited: %w", err)
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop shuts the server down fast (SIGINT to its postmaster), then kills its
// process group if it has not exited within 30 s.
func (c *catalogServer) stop(t *testing.T) {
	if c.db != nil {
		c.db.Close()
	}
	select {
	case <-c.exited:
		return // a scenario that stopped it failed before starting it again
	default:
	}
	pid := c.cmd.Process.Pid
	syscall.Kill(pid, syscall.SIGINT)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		syscall.Kill(-pid, syscall.SIGKILL)
		<-c.exited
		t.Errorf("the catalog (postmaster %d) did not stop within 30s of SIGINT", pid)
	}
}

// count runs a counting query on the catalog.
func (c *catalogServer) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := c.db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("catalog: %s: %v", query, err)
	}
	return n
}

// branchRow is what the catalog records of one branch.
type branchRow struct {
	id    int64
	node  string
	epoch int64
	state string
}

// branch returns the row of the branch name of source app; ok is false without one.
func (c *catalogServer) branch(t *testing.T, name string) (b branchRow, ok bool) {
	t.Helper()
	err := c.db.QueryRow("SELECT id, node_id, node_epoch, state FROM branches WHERE source = 'app' AND name = $1", name).
		Scan(&b.id, &b.node, &b.epoch, &b.state)
	if err == sql.ErrNoRows {
		return b, false
	}
	if err != nil {
		t.Fatalf("catalog: branch %s: %v", name, err)
	}
	return b, true
}

// node returns a node's epoch and state.
func (c *catalogServer) node(t *testing.T, id string) (epoch int64, state string) {
	t.Helper()
	if err := c.db.QueryRow("SELECT epoch, state FROM nodes WHERE id = $1", id).Scan(&epoch, &state); err != nil {
		t.Fatalf("catalog: node %s: %v", id, err)
	}
	return epoch, state
}

// readTail returns the last n lines of a file, for failure messages.
func readTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n"))) + "\n(last " + strconv.Itoa(len(lines)) + " lines of " + path + ")"
}

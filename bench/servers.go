package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgServer is one plain PostgreSQL cluster this harness runs: the scratch cluster
// that generated a data set, kept as the "plain copy" the proxy is compared with,
// or a copied data directory. It always listens on a unix socket in sockDir and,
// when port is not zero, on 127.0.0.1:port.
type pgServer struct {
	dataDir string
	sockDir string
	port    int // TCP port, also the socket's number; 0 before start
	tcp     bool
	proc    *proc
}

// pgEnv is the environment Postgres programs run with (the proxy's runtime uses the
// same LANG, so seeds and plain clusters get the same locale).
func (e *env) pgEnv() []string {
	return []string{"PATH=" + e.pgBin + ":/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/"}
}

// runAsPG runs a Postgres program to completion as the postgres OS user.
func (e *env) runAsPG(ctx context.Context, prog string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(e.pgBin, prog), args...)
	cmd.Env = e.pgEnv()
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true,
		Credential: &syscall.Credential{Uid: uint32(e.pgUser.UID), Gid: uint32(e.pgUser.GID)}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", prog, strings.Join(args, " "), err, tail(string(out), 10))
	}
	return nil
}

// mkdirPG makes dir (mode 0700) owned by the postgres OS user.
func (e *env) mkdirPG(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return e.pgUser.chown(dir)
}

// initCluster runs initdb for a fresh cluster in dataDir (which must not exist).
func (e *env) initCluster(ctx context.Context, dataDir string) error {
	if err := e.mkdirPG(dataDir); err != nil {
		return err
	}
	return e.runAsPG(ctx, "initdb", "-D", dataDir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
}

// startPG starts postgres on dataDir with the settings a branch server gets
// (logging to a file, syncfs recovery) plus a TCP listener on a free loopback port
// when tcp is set. It returns once a connection to probeDB (over TCP when tcp is
// set) and a SELECT 1 succeed.
func (e *env) startPG(ctx context.Context, name, dataDir, sockDir string, tcp bool, probeDB string) (*pgServer, error) {
	if err := e.mkdirPG(sockDir); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	listen := ""
	if tcp {
		listen = "127.0.0.1"
	}
	s := &pgServer{dataDir: dataDir, sockDir: sockDir, port: port, tcp: tcp}
	args := []string{"-D", dataDir,
		"-c", "listen_addresses=" + listen,
		"-c", "port=" + strconv.Itoa(port),
		"-c", "unix_socket_directories=" + sockDir,
		"-c", "unix_socket_permissions=0700",
		"-c", "logging_collector=off",
		"-c", "recovery_init_sync_method=syncfs",
		"-c", "cluster_name=bench-" + name,
	}
	s.proc, err = startProc("postgres "+name, &e.pgUser, e.pgEnv(), syscall.SIGINT, e.logPath("postgres-"+name), filepath.Join(e.pgBin, "postgres"), args...)
	if err != nil {
		return nil, err
	}
	e.cl.push("postgres "+name, s.stop)
	probe := s.unixDSN(probeDB)
	if tcp {
		probe = s.tcpDSN(probeDB)
	}
	if _, err := waitFirstQuery(ctx, probe, s.proc, 60*time.Second); err != nil {
		_ = s.stop()
		return nil, fmt.Errorf("postgres %s: %w\n%s", name, err, s.proc.logTail(10))
	}
	return s, nil
}

// stop shuts the server down (fast shutdown, SIGINT) and waits for it.
func (s *pgServer) stop() error {
	if s == nil || s.proc == nil {
		return nil
	}
	return s.proc.stop()
}

// unixDSN connects to db over the unix socket.
func (s *pgServer) unixDSN(db string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", s.sockDir, s.port, db)
}

// tcpDSN connects to db over 127.0.0.1.
func (s *pgServer) tcpDSN(db string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=%s sslmode=disable", s.port, db)
}

// pgbouncer is a PgBouncer in session mode in front of one pgServer, on a loopback
// port, run as the postgres OS user with its own configuration.
type pgbouncer struct {
	port    int
	sockDir string // its unix socket's directory
	proc    *proc
}

// startPgbouncer runs PgBouncer in front of target, reaching it over its unix
// socket as the proxy reaches a branch; it takes clients on a loopback port and on a
// unix socket in its directory.
func (e *env) startPgbouncer(ctx context.Context, target *pgServer) (*pgbouncer, error) {
	dir := filepath.Join(e.root, "pgbouncer")
	if err := e.mkdirPG(dir); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%d
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir = %s
auth_type = trust
auth_file = %s
pool_mode = session
max_client_conn = 200
default_pool_size = 40
logfile = %s
ignore_startup_parameters = extra_float_digits
`, target.sockDir, target.port, port, dir, filepath.Join(dir, "userlist.txt"), filepath.Join(dir, "pgbouncer.log"))
	for name, body := range map[string]string{"pgbouncer.ini": ini, "userlist.txt": "\"postgres\" \"\"\n"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			return nil, err
		}
		if err := e.pgUser.chown(p); err != nil {
			return nil, err
		}
	}
	b := &pgbouncer{port: port, sockDir: dir}
	b.proc, err = startProc("pgbouncer", &e.pgUser, []string{"PATH=/usr/bin:/bin", "HOME=/"}, syscall.SIGINT,
		e.logPath("pgbouncer-stdout"), e.pgbouncerBin, filepath.Join(dir, "pgbouncer.ini"))
	if err != nil {
		return nil, err
	}
	e.cl.push("pgbouncer", b.stop)
	if _, err := waitFirstQuery(ctx, b.dsn("postgres"), b.proc, 30*time.Second); err != nil {
		_ = b.stop()
		log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
		return nil, fmt.Errorf("pgbouncer: %w\n%s", err, tail(string(log), 10))
	}
	return b, nil
}

func (b *pgbouncer) dsn(db string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=%s sslmode=disable", b.port, db)
}

// unixDSN connects to db through PgBouncer's unix socket.
func (b *pgbouncer) unixDSN(db string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s", b.sockDir, b.port, db)
}

func (b *pgbouncer) stop() error {
	if b == nil || b.proc == nil {
		return nil
	}
	return b.proc.stop()
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitFirstQuery connects to dsn every 2 ms until a connection and SELECT 1
// succeed, and returns how long that took. It gives up when p exits or after limit.
func waitFirstQuery(ctx context.Context, dsn string, p *proc, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	var last error
	for time.Since(start) < limit {
		if p != nil && p.exited() {
			return 0, fmt.Errorf("exited before accepting connections (last error: %v)", last)
		}
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := firstQuery(actx, dsn)
		cancel()
		if err == nil {
			return time.Since(start), nil
		}
		last = err
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		time.Sleep(2 * time.Millisecond)
	}
	return 0, fmt.Errorf("no connection within %v: %w", limit, last)
}

// firstQuery connects to dsn with pgx, runs SELECT 1, closes, and returns the time
// from the start of the connect to the query's result.
func firstQuery(ctx context.Context, dsn string) (time.Duration, error) {
	start := time.Now()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	var one int
	err = c.QueryRow(ctx, "SELECT 1").Scan(&one)
	d := time.Since(start)
	c.Close(context.Background())
	if err == nil && one != 1 {
		err = errors.New("SELECT 1 did not return 1")
	}
	return d, err
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

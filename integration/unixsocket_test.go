package integration

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestUnixSocket: with --unix-socket-dir, psql and pgx reach branches through a
// unix socket named as Postgres names its own; server sessions are reused and
// cancels work there; TLS is neither offered nor required on it (--tls-mode
// require still refuses plaintext TCP); a socket a killed serve left is replaced,
// one a running serve holds is not, and a clean stop removes it.
func TestUnixSocket(t *testing.T) {
	state := newStateDir(t)
	dir := filepath.Join(filepath.Dir(state), "sock")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, state, "--unix-socket-dir", dir, "--tls-auto", "--tls-mode", "require")
	s.seedSQL("shop", shopSQL)
	_, port, _ := net.SplitHostPort(s.addr)
	sock := filepath.Join(dir, ".s.PGSQL."+port)
	if st, err := os.Stat(sock); err != nil || st.Mode().Perm() != 0o777 {
		t.Fatalf("socket %s: %v %v, want mode 0777", sock, st, err)
	}
	if info := s.mustCLI("info"); !strings.Contains(info, `"unix_socket": "`+sock+`"`) {
		t.Errorf("info does not name the socket %s:\n%s", sock, info)
	}
	local := func(db string, extra ...string) string {
		return strings.Join(append([]string{"host=" + dir, "port=" + port, "user=postgres", "dbname=" + db}, extra...), " ")
	}

	t.Run("psql", func(t *testing.T) {
		out, err := exec.Command("psql", "-X", "-At", local("shop@u1"), "-c", "SELECT count(*) FROM accounts").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) == "" {
			t.Fatalf("psql over the unix socket: %v\n%s\n%s", err, out, s.logs())
		}
		// TCP without TLS is refused under --tls-mode require; the socket is not.
		if _, err := s.psql(t, "shop@u1", "SELECT 1"); err == nil {
			t.Error("plaintext TCP session accepted under --tls-mode require")
		}
	})

	t.Run("ReuseAndCancel", func(t *testing.T) {
		ctx := context.Background()
		pid := func() uint32 {
			c, err := pgx.Connect(ctx, local("shop@u2", "sslmode=prefer"))
			if err != nil {
				t.Fatalf("pgx over the unix socket: %v\n%s", err, s.logs())
			}
			defer c.Close(ctx)
			var p uint32
			if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&p); err != nil || p != c.PgConn().PID() {
				t.Fatalf("pid %d (%v), reported %d", p, err, c.PgConn().PID())
			}
			return p
		}
		a := pid()
		parkedOn(t, s, "u2", 1)
		if b := pid(); a != b {
			t.Errorf("second session over the socket forked backend %d, want the first's %d reused", b, a)
		}
		c, err := pgx.Connect(ctx, local("shop@u2"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		cancelWhenRunning(t, local("shop@u2"), c, "pg_sleep")
		if _, err = c.Exec(ctx, "SELECT pg_sleep(30)"); pgCode(err) != "57014" {
			t.Fatalf("cancel over the unix socket: %v, want 57014", err)
		}
	})

	t.Run("SocketInUse", func(t *testing.T) {
		// Another loopback address, the same port: the TCP listen succeeds, the
		// socket's name is the running serve's.
		out, err := exec.Command(binPath, "--state-dir", filepath.Join(filepath.Dir(state), "other"), "serve",
			"--listen", "127.0.0.2:"+port, "--unix-socket-dir", dir, "--auth", "trust").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "another pgbranchproxy holds") {
			t.Fatalf("a second serve on the same socket: %v\n%s", err, out)
		}
		if _, err := os.Stat(sock); err != nil {
			t.Fatalf("the running serve's socket is gone after a second serve failed: %v", err)
		}
	})

	s.kill9()
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("socket after kill -9: %v", err)
	}
	s.start() // replaces the socket the killed run left
	if out, err := exec.Command("psql", "-X", "-At", local("shop@u1"), "-c", "SELECT 1").CombinedOutput(); err != nil {
		t.Fatalf("psql over the socket after a restart: %v\n%s\n%s", err, out, s.logs())
	}
	s.stop()
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after a clean stop: %v, want it removed", err)
	}
}

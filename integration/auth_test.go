package integration

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

const rolesSQL = `
CREATE TABLE t (id int PRIMARY KEY);
INSERT INTO t SELECT generate_series(1, 10);
CREATE ROLE alice LOGIN PASSWORD 'alice-pw';
SET password_encryption = 'md5';
CREATE ROLE bob LOGIN PASSWORD 'bob-pw';
RESET password_encryption;
CREATE ROLE closed NOLOGIN PASSWORD 'closed-pw';
CREATE ROLE expired LOGIN PASSWORD 'expired-pw' VALID UNTIL '2001-01-01';
CREATE ROLE nopass LOGIN;
GRANT SELECT ON t TO alice, bob;
`

func (s *server) dsnAs(db, user, password string, extra ...string) string {
	host, port, _ := net.SplitHostPort(s.addr)
	return strings.Join(append([]string{"host=" + host, "port=" + port, "user=" + user, "password=" + password, "dbname=" + db}, extra...), " ")
}

func tryConnect(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	var n int
	return c.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n)
}

func TestAuthAtTheProxy(t *testing.T) {
	state := newStateDir(t)
	s := startServer(t, state, "--auth", "scram-sha-256", "--tls-auto", "--reap-interval", "200ms", "--max-failed-logins", "-1")
	s.seedSQL("app", rolesSQL)
	ca := filepath.Join(state, "tls", "ca.crt")

	t.Run("RightPassword", func(t *testing.T) {
		if err := tryConnect(s.dsnAs("app@a1", "alice", "alice-pw", "sslmode=disable")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("FailuresLookAlikeAndTouchNothing", func(t *testing.T) {
		var msgs []string
		for _, tc := range []struct{ user, pw, branch string }{
			{"alice", "wrong", "f1"}, {"nobody", "whatever", "f2"}, {"closed", "closed-pw", "f3"},
			{"expired", "expired-pw", "f4"}, {"nopass", "", "f5"}, {"postgres", "", "f6"},
		} {
			err := tryConnect(s.dsnAs("app@"+tc.branch, tc.user, tc.pw, "sslmode=disable"))
			if pgCode(err) != "28P01" {
				t.Errorf("%s: %v, want 28P01", tc.user, err)
				continue
			}
			var pe *pgconn.PgError
			errors.As(err, &pe)
			msgs = append(msgs, strings.ReplaceAll(pe.Message, tc.user, "USER"))
		}
		for _, m := range msgs[1:] {
			if m != msgs[0] {
				t.Errorf("failure messages differ:\n%s\n%s", msgs[0], m)
			}
		}
		b := s.branches()
		for _, n := range []string{"f1", "f2", "f3", "f4", "f5", "f6"} {
			if _, ok := b[n]; ok {
				t.Errorf("a failed login created branch %s", n)
			}
		}
	})
	t.Run("FailedLoginDoesNotWake", func(t *testing.T) {
		waitNoSessions(t, s, "a1")
		s.mustCLI("branch", "stop", "a1")
		tryConnect(s.dsnAs("app@a1", "alice", "wrong", "sslmode=disable"))
		if st := s.branches()["a1"].State; st != "stopped" {
			t.Errorf("a failed login woke the branch: %s", st)
		}
	})
	t.Run("TLS", func(t *testing.T) {
		for _, extra := range [][]string{
			{"sslmode=require"},
			{"sslmode=verify-full", "sslrootcert=" + ca},
			{"sslmode=require", "sslnegotiation=direct"},
		} {
			dsn := s.dsnAs("app@tls", "alice", "alice-pw", extra...)
			if err := tryConnect(strings.Replace(dsn, "host=127.0.0.1", "host=localhost", 1)); err != nil {
				t.Errorf("%v: %v", extra, err)
			}
		}
		// psql (libpq) with full verification too.
		host, port, _ := net.SplitHostPort(s.addr)
		_ = host
		cmd := exec.Command("psql", "-X", "-At", "-c", "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
			"host=localhost port="+port+" user=alice dbname=app@tls sslmode=verify-full sslrootcert="+ca)
		cmd.Env = append(cmd.Environ(), "PGPASSWORD=alice-pw")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("psql verify-full: %v %s", err, out)
		}
		// The branch server itself runs without SSL: TLS ends at the proxy.
		if strings.TrimSpace(string(out)) != "f" {
			t.Logf("pg_stat_ssl inside the branch: %q", out)
		}
	})
	t.Run("MD5RoleWithSCRAMServer", func(t *testing.T) {
		// Like Postgres with scram-sha-256 in hba, an md5 verifier cannot be used.
		if err := tryConnect(s.dsnAs("app@m", "bob", "bob-pw", "sslmode=disable")); pgCode(err) != "28P01" {
			t.Errorf("md5 role under scram: %v", err)
		}
	})
	t.Run("PasswordChangedInBranch", func(t *testing.T) {
		c, err := pgx.Connect(context.Background(), s.dsnAs("app@pw", "alice", "alice-pw", "sslmode=disable"))
		if err != nil {
			t.Fatal(err)
		}
		// A role may change its own password.
		if _, err := c.Exec(context.Background(), "ALTER ROLE alice PASSWORD 'changed-pw'"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "new password accepted in that branch", func() bool {
			return tryConnect(s.dsnAs("app@pw", "alice", "changed-pw", "sslmode=disable")) == nil
		})
		c.Close(context.Background())
		if err := tryConnect(s.dsnAs("app@pw", "alice", "alice-pw", "sslmode=disable")); pgCode(err) != "28P01" {
			t.Errorf("old password still accepted in the branch: %v", err)
		}
		if err := tryConnect(s.dsnAs("app@other", "alice", "alice-pw", "sslmode=disable")); err != nil {
			t.Errorf("other branches keep the seed's password: %v", err)
		}
		// It survives a stop: read before the server stops.
		s.mustCLI("branch", "stop", "pw")
		if err := tryConnect(s.dsnAs("app@pw", "alice", "changed-pw", "sslmode=disable")); err != nil {
			t.Errorf("after stop and wake: %v", err)
		}
	})
	t.Run("CancelThroughTLS", func(t *testing.T) {
		c, err := pgx.Connect(context.Background(), s.dsnAs("app@tls", "alice", "alice-pw", "sslmode=require"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		cancelWhenRunning(t, s.dsnAs("app@tls", "alice", "alice-pw", "sslmode=require"), c, "pg_sleep")
		_, err = c.Exec(context.Background(), "SELECT pg_sleep(60)")
		if pgCode(err) != "57014" {
			t.Errorf("cancel over TLS: %v", err)
		}
	})
}

func TestAuthMD5AndRateLimit(t *testing.T) {
	s := startServer(t, newStateDir(t), "--auth", "md5", "--max-failed-logins", "3")
	s.seedSQL("app", rolesSQL)
	if err := tryConnect(s.dsnAs("app@b", "bob", "bob-pw", "sslmode=disable")); err != nil {
		t.Fatalf("md5 role: %v", err)
	}
	if err := tryConnect(s.dsnAs("app@b", "alice", "alice-pw", "sslmode=disable")); err != nil {
		t.Fatalf("scram role under md5 (uses SCRAM, as Postgres does): %v", err)
	}
	for i := 0; i < 3; i++ {
		tryConnect(s.dsnAs("app@b", "bob", "nope", "sslmode=disable"))
	}
	err := tryConnect(s.dsnAs("app@b", "bob", "bob-pw", "sslmode=disable"))
	if pgCode(err) != "28P01" || !strings.Contains(err.Error(), "too many failed login attempts") {
		t.Fatalf("after 3 failures: %v", err)
	}
}

func TestTrustRefusedOffLoopback(t *testing.T) {
	cmd := exec.Command(binPath, "--state-dir", newStateDir(t), "serve", "--listen", "0.0.0.0:0", "--auth", "trust")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--insecure-trust") {
		t.Fatalf("serve --auth trust on 0.0.0.0: %v\n%s", err, out)
	}
}

func TestFrontDoorLimits(t *testing.T) {
	s := startServer(t, newStateDir(t), "--client-write-timeout", "1s")
	s.seedSQL("app", lifecycleSQL)
	if _, err := s.psql(t, "app@limits", "SELECT 1"); err != nil {
		t.Fatal(err)
	}

	t.Run("IdleFloodDoesNotBlockLogins", func(t *testing.T) {
		start := time.Now()
		if err := tryConnect(s.dsn("app@limits")); err != nil {
			t.Fatal(err)
		}
		baseline := time.Since(start)
		var idle []net.Conn
		for i := 0; i < 300; i++ {
			c, err := net.Dial("tcp", s.addr)
			if err != nil {
				t.Fatal(err)
			}
			idle = append(idle, c)
		}
		defer func() {
			for _, c := range idle {
				c.Close()
			}
		}()
		start = time.Now()
		if err := tryConnect(s.dsn("app@limits")); err != nil {
			t.Fatalf("login with 300 idle connections open: %v", err)
		}
		t.Logf("login took %s alone, %s with 300 silent connections open", baseline, time.Since(start))
	})

	t.Run("SlowReaderIsCutOff", func(t *testing.T) {
		conn, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.(*net.TCPConn).SetReadBuffer(4096)
		fe := pgproto3.NewFrontend(conn, conn)
		fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
			Parameters: map[string]string{"user": "postgres", "database": "app@limits", "application_name": "slow-reader"}})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := fe.Receive()
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
				break
			}
		}
		fe.Send(&pgproto3.Query{String: "SELECT repeat('x', 1000) FROM generate_series(1, 200000)"})
		fe.Flush()
		// Never read. Another client is unaffected, and the slow one's session ends.
		time.Sleep(500 * time.Millisecond)
		if err := tryConnect(s.dsn("app@limits")); err != nil {
			t.Fatalf("other client while one stalls: %v", err)
		}
		eventually(t, 20*time.Second, "stalled session ended in the branch", func() bool {
			out, err := s.psql(t, "app@limits", "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'slow-reader'")
			return err == nil && out == "0"
		})
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		// The proxy resets the connection: a reset or an end, never a hang.
		if n, err := io.Copy(io.Discard, conn); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Logf("read %d bytes", n)
			t.Errorf("the proxy did not close the stalled connection: %v", err)
		}
	})
}

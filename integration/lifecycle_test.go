package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const lifecycleSQL = `CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT g, 'seed' FROM generate_series(1, 1000) g;`

func TestIdleStopAndWake(t *testing.T) {
	s := startServer(t, newStateDir(t), "--idle-stop", "1s", "--reap-interval", "100ms")
	s.seedSQL("app", lifecycleSQL)
	if _, err := s.psql(t, "app@idle", "UPDATE t SET v = 'mine' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	// A branch with an open, idle session is never stopped.
	held := s.connect(t, "app@held")
	time.Sleep(2500 * time.Millisecond)
	b := s.branches()
	if b["held"].State != "running" || b["held"].Sessions != 1 {
		t.Errorf("branch with an open session: %+v", b["held"])
	}
	var one int
	if err := held.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil {
		t.Errorf("held session broke: %v", err)
	}
	eventually(t, 10*time.Second, "idle branch stopped", func() bool { return s.branches()["idle"].State == "stopped" })
	if pid := b["idle"].PID; pid != 0 && len(postmastersWithPID(s.state, pid)) > 0 {
		t.Errorf("stopped branch's postmaster %d still runs", pid)
	}
	out, err := s.psql(t, "app@idle", "SELECT v FROM t WHERE id = 1")
	if err != nil || out != "mine" {
		t.Fatalf("after wake: %q %v", out, err)
	}
	if !strings.Contains(s.logs(), "branch woken") {
		t.Errorf("wake not logged")
	}
	metrics := s.metrics(t)
	if !strings.Contains(metrics, `pgbranch_branch_actions_total{action="stop",reason="idle"}`) ||
		!strings.Contains(metrics, `pgbranch_branch_actions_total{action="wake",reason="connection"}`) {
		t.Errorf("metrics lack stop/wake counters:\n%s", grepLines(metrics, "pgbranch_branch_actions"))
	}
}

func postmastersWithPID(state string, pid int) []int {
	var out []int
	for _, p := range postmastersUnder(state) {
		if p == pid {
			out = append(out, p)
		}
	}
	return out
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// metrics fetches /metrics over the admin socket.
func (s *server) metrics(t testing.TB) string {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", filepath.Join(s.state, "admin.sock"))
	}}}
	resp, err := client.Get("http://pgbranchproxy/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	return string(b)
}

func TestTTLAndEphemeral(t *testing.T) {
	state := newStateDir(t)
	s := startServer(t, state, "--reap-interval", "200ms")
	s.seedSQL("app", lifecycleSQL)

	// Ephemeral: gone within about a second of the last session ending.
	c := s.connect(t, "app@test-1", "options=-cpgbranch.ephemeral=on")
	c2 := s.connect(t, "app@test-1")
	c.Close(context.Background())
	time.Sleep(1500 * time.Millisecond)
	if _, ok := s.branches()["test-1"]; !ok {
		t.Fatal("ephemeral branch destroyed while a session was open")
	}
	c2.Close(context.Background())
	eventually(t, 5*time.Second, "ephemeral branch destroyed", func() bool { _, ok := s.branches()["test-1"]; return !ok })

	// Per-branch TTL from the startup options; a named branch without one stays.
	if _, err := s.psql(t, "app@pr-1", "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cli("branch", "create", "short", "--ttl", "1s"); err != nil {
		t.Fatal(err)
	}
	c3 := s.connect(t, "app@ttl-held", "options=-cpgbranch.ttl=1s")
	eventually(t, 10*time.Second, "ttl branch destroyed", func() bool { _, ok := s.branches()["short"]; return !ok })
	if _, ok := s.branches()["ttl-held"]; !ok {
		t.Fatal("a branch with an open session was destroyed by its TTL")
	}
	c3.Close(context.Background())
	eventually(t, 10*time.Second, "ttl-held destroyed after its session", func() bool { _, ok := s.branches()["ttl-held"]; return !ok })
	if _, ok := s.branches()["pr-1"]; !ok {
		t.Fatal("a branch without TTL was destroyed")
	}

	// A restart in the middle of a countdown keeps the schedule (from the catalog).
	s.mustCLI("branch", "create", "pr-2")
	s.mustCLI("branch", "set", "pr-2", "--ttl", "4s")
	time.Sleep(time.Second)
	s.stop()
	s2 := startServer(t, state, "--reap-interval", "200ms")
	if b, ok := s2.branches()["pr-2"]; !ok || b.ExpiresAt == nil {
		t.Fatalf("pr-2 after restart: %+v", b)
	}
	eventually(t, 15*time.Second, "pr-2 destroyed on schedule after restart", func() bool { _, ok := s2.branches()["pr-2"]; return !ok })
	if _, ok := s2.branches()["pr-1"]; !ok {
		t.Fatal("pr-1 lost across restart")
	}
}

func TestResetOnConnect(t *testing.T) {
	s := startServer(t, newStateDir(t))
	s.seedSQL("app", lifecycleSQL)
	if _, err := s.psql(t, "app@r", "DELETE FROM t"); err != nil {
		t.Fatal(err)
	}
	c := s.connect(t, "app@r")
	_, err := s.connectErr("app@r", "options=-cpgbranch.reset=on")
	if pgCode(err) != "55006" {
		t.Fatalf("reset with another session open: %v, want 55006", err)
	}
	var n int
	if err := c.QueryRow(context.Background(), "SELECT count(*) FROM t").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the other session's data changed: %d rows, %v", n, err)
	}
	c.Close(context.Background())
	// The proxy sees the other session end a moment after the client closes it.
	eventually(t, 5*time.Second, "reset on connect once the other session ended", func() bool {
		_, err := s.connectErr("app@r", "options=-cpgbranch.reset=on")
		return err == nil
	})
	r := s.connect(t, "app@r")
	if err := r.QueryRow(context.Background(), "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1000 {
		t.Fatalf("after reset on connect: %d rows, %v", n, err)
	}
}

func TestQuota(t *testing.T) {
	for _, policy := range []string{"reset", "refuse"} {
		t.Run(policy, func(t *testing.T) {
			s := startServer(t, newStateDir(t), "--quota", "8MB", "--quota-policy", policy, "--reap-interval", "100ms")
			s.seedSQL("app", lifecycleSQL)
			c := s.connect(t, "app@big")
			if _, err := c.Exec(context.Background(), "CREATE TABLE fill AS SELECT g, repeat('q', 500) AS pad FROM generate_series(1, 40000) g; CHECKPOINT"); err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, "new sessions refused with 53100", func() bool {
				_, err := s.connectErr("app@big")
				return pgCode(err) == "53100"
			})
			// psql shows the reason (pgx above saw the SQLSTATE).
			cmd := exec.Command("psql", "-X", s.dsn("app@big"), "-c", "SELECT 1")
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "over its disk quota") {
				t.Errorf("psql over quota: %v: %s", err, out)
			}
			// The open session keeps working meanwhile.
			var one int
			if err := c.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil {
				t.Fatalf("open session broke: %v", err)
			}
			c.Close(context.Background())
			if policy == "reset" {
				eventually(t, 10*time.Second, "over-quota branch reset and accepting", func() bool {
					out, err := s.psql(t, "app@big", "SELECT count(*) FROM pg_class WHERE relname = 'fill'")
					return err == nil && out == "0"
				})
			} else {
				time.Sleep(time.Second)
				if _, err := s.connectErr("app@big"); pgCode(err) != "53100" {
					t.Fatalf("refuse policy let a session in: %v", err)
				}
				s.mustCLI("branch", "reset", "big")
				eventually(t, 10*time.Second, "accepting after reset", func() bool {
					_, err := s.psql(t, "app@big", "SELECT 1")
					return err == nil
				})
			}
		})
	}
}

func TestMaxRunning(t *testing.T) {
	s := startServer(t, newStateDir(t), "--max-running", "2")
	s.seedSQL("app", lifecycleSQL)
	a := s.connect(t, "app@m1")
	for _, name := range []string{"m2", "m3"} {
		if _, err := s.psql(t, "app@"+name, "SELECT 1"); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	b := s.branches()
	if b["m1"].State != "running" || b["m2"].State != "stopped" || b["m3"].State != "running" {
		t.Fatalf("after m3: m1 %s, m2 %s, m3 %s; want the idle least recently used (m2) stopped", b["m1"].State, b["m2"].State, b["m3"].State)
	}
	c := s.connect(t, "app@m3")
	_, err := s.connectErr("app@m4")
	if pgCode(err) != "53300" {
		t.Fatalf("third running branch with two busy: %v, want 53300", err)
	}
	var one int
	if err := a.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	// A connection that finds both busy waits (up to 5 s) for one to go idle:
	// m3's session ends while it waits, and it gets in.
	got := make(chan error, 1)
	go func() {
		_, err := s.psql(t, "app@m4", "SELECT 1")
		got <- err
	}()
	time.Sleep(500 * time.Millisecond) // m4's connection is waiting for room by now
	c.Close(context.Background())
	if err := <-got; err != nil {
		t.Fatalf("m4, waiting while m3's session ended: %v", err)
	}
}

func TestDiskBudget(t *testing.T) {
	s := startServer(t, newStateDir(t), "--disk-budget", "24MB", "--reap-interval", "100ms")
	s.seedSQL("app", lifecycleSQL)
	fill := "CREATE TABLE fill AS SELECT g, repeat('q', 500) AS pad FROM generate_series(1, 12000) g; CHECKPOINT"
	c := s.connect(t, "app@keep")
	if _, err := c.Exec(context.Background(), fill); err != nil {
		t.Fatal(err)
	}
	if _, err := s.psql(t, "app@evictable", fill); err != nil {
		t.Fatal(err)
	}
	// Over the budget: the idle branch is evicted (reset), the busy one never.
	eventually(t, 10*time.Second, "idle branch evicted", func() bool {
		return s.branches()["evictable"].OwnedBytes < 1<<20
	})
	// Left stopped: restarted, its server's own files would make it owned again and
	// every pass over the budget would evict it once more.
	for range 5 {
		if b := s.branches()["evictable"]; b.State != "stopped" {
			t.Fatalf("evicted branch is %s; want it left stopped", b.State)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := s.psql(t, "app@evictable", "SELECT count(*) FROM pg_class WHERE relname = 'fill'"); err != nil || out != "0" {
		t.Errorf("evicted branch: %q, %v; want its writes gone (0)", out, err)
	}
	if _, err := c.Exec(context.Background(), "CREATE TABLE fill2 AS SELECT * FROM fill; CREATE TABLE fill3 AS SELECT * FROM fill; CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "new branches refused with 53100", func() bool {
		_, err := s.connectErr(fmt.Sprintf("app@new-%d", time.Now().UnixNano()%1000))
		return pgCode(err) == "53100"
	})
	var n int
	if err := c.QueryRow(context.Background(), "SELECT count(*) FROM fill3").Scan(&n); err != nil || n != 12000 {
		t.Fatalf("busy branch lost data: %d %v", n, err)
	}
}

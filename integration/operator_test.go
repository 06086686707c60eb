package integration

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOperatorView: what an operator of serve reads. Its start logs the disk
// budget in bytes when --disk-budget was a percentage, its ready line how it
// takes clients and where its metrics are, and /metrics counts refused
// connections by the SQLSTATE their clients got.
func TestOperatorView(t *testing.T) {
	state := newStateDir(t)
	metrics := freeAddr(t)
	s := startServer(t, state, "--auth", "scram-sha-256", "--disk-budget", "50%", "--max-failed-logins", "-1", "--metrics-listen", metrics)
	s.seedSQL("app", "CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1); CREATE ROLE alice LOGIN PASSWORD 'alice-pw'; GRANT SELECT ON t TO alice;")

	t.Run("DiskBudgetInBytes", func(t *testing.T) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(filepath.Dir(state), &st); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`"disk_budget_bytes": %d`, int64(float64(st.Blocks)*float64(st.Bsize)*50/100))
		if line := grepLines(s.logs(), "lifecycle policy"); !strings.Contains(line, want) || !strings.Contains(line, "50% of the state directory's filesystem") {
			t.Errorf("start-up log says of the budget:\n%s\nwant %s", line, want)
		}
	})

	t.Run("ReadyLineSaysHow", func(t *testing.T) {
		line := grepLines(s.logs(), "pgbranchproxy ready")
		for _, want := range []string{`"auth": "scram-sha-256"`, `"relay": "` + cmp.Or(os.Getenv("INTEGRATION_RELAY"), "epoll") + `"`, `"metrics": "` + metrics + `"`} {
			if !strings.Contains(line, want) {
				t.Errorf("ready line lacks %s:\n%s", want, line)
			}
		}
	})

	t.Run("RefusedBySQLSTATE", func(t *testing.T) {
		if err := tryConnect(s.dsnAs("app@r1", "alice", "alice-pw", "sslmode=disable")); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if err := tryConnect(s.dsnAs("app@r1", "alice", "wrong", "sslmode=disable")); pgCode(err) != "28P01" {
				t.Fatalf("wrong password: %v, want 28P01", err)
			}
		}
		if err := tryConnect(s.dsnAs("app@Bad_Name", "alice", "alice-pw", "sslmode=disable")); pgCode(err) != "3D000" {
			t.Fatalf("bad branch name: %v, want 3D000", err)
		}
		m := s.metrics(t)
		for _, want := range []string{`pgbranch_proxy_refused_total{sqlstate="28P01"} 2`, `pgbranch_proxy_refused_total{sqlstate="3D000"} 1`,
			`pgbranch_proxy_refused_total{sqlstate="53300"} 0`, `pgbranch_proxy_refused_total{sqlstate="other"} 0`} {
			if !strings.Contains(m, want+"\n") {
				t.Errorf("/metrics lacks %s:\n%s", want, grepLines(m, "refused"))
			}
		}
	})
}

// TestZeroCountsRefusedAtStart: serve refuses the counts to which 0 means nothing,
// naming the flag, instead of taking their defaults in silence (--max-failed-logins
// 0 was 20 failures a minute).
func TestZeroCountsRefusedAtStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, flag := range []string{"--max-failed-logins", "--max-creating", "--max-layers"} {
		if out := serveRefused(t, ctx, newStateDir(t), flag, "0"); !strings.Contains(out, flag+" 0: ") {
			t.Errorf("serve %s 0 said:\n%s", flag, out)
		}
	}
}

// TestBranchGaugesAtStart: /metrics has the branches by state as soon as serve
// takes clients, not from its first reaper pass, --reap-interval later (a
// restarted server's scrape said nothing of its branches until then).
func TestBranchGaugesAtStart(t *testing.T) {
	s := startServer(t, newStateDir(t), "--reap-interval", "1h")
	s.seedSQL("app", "CREATE TABLE t (id int);")
	mustPsql(t, s, "app@b1", "SELECT 1")
	mustPsql(t, s, "app@b2", "SELECT 1")
	s.mustCLI("branch", "stop", "b2")
	s.stop()
	s.start()
	m := s.metrics(t)
	for _, want := range []string{`pgbranch_branches{state="stopped"} 2`, `pgbranch_branches{state="running"} 0`, "pgbranch_sessions 0"} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("/metrics at start lacks %s:\n%s", want, grepLines(m, "pgbranch_branches"))
		}
	}
}

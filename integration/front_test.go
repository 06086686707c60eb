package integration

import (
	"context"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgbranchproxy/pgbranchproxy/branches"
)

// startFront starts serve --role front on the catalog at url.
func startFront(t *testing.T, url string, extra ...string) *server {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o711)
	s := &server{t: t, state: dir, addr: freeAddr(t), stateDir: dir}
	s.args = append([]string{"--state-dir", dir, "serve", "--role", "front", "--listen", s.addr, "--catalog", url}, extra...)
	if !slices.Contains(extra, "--auth") {
		s.args = append(s.args, "--auth", "trust")
	}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// TestFrontRoutesToNode: a front on a shared Postgres catalog authenticates a
// client with the roles the catalog records, creates a new branch on the node
// (the node's row owns it), serves a running one there again with the node's
// server session reused, forwards cancel requests, and tells a client in real
// SQLSTATEs what went wrong: an unknown database (3D000), a node that is down
// (57P03).
func TestFrontRoutesToNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, url := startCatalog(t, ctx)
	state := newStateDir(t)
	// The node's epoll loop, whatever INTEGRATION_RELAY says: the test checks that
	// a front's node connections are kept for its next sessions, which the
	// kernel relay does not do (README).
	node := startServer(t, state, "--catalog", url, "--role", "node", "--relay", "epoll")
	node.seedSQL("app", rolesSQL+"GRANT CREATE ON SCHEMA public TO alice;")
	metricsAddr := freeAddr(t)
	fr := startFront(t, url, "--auth", "scram-sha-256", "--max-failed-logins", "-1", "--metrics-listen", metricsAddr)

	if err := tryConnect(fr.dsnAs("app@viafront", "alice", "wrong", "sslmode=disable")); pgCode(err) != "28P01" {
		t.Fatalf("wrong password through the front: %v, want 28P01", err)
	}
	if _, ok := node.branches()["viafront"]; ok {
		t.Fatal("a failed login created the branch")
	}
	c := connectDSN(t, ctx, fr.dsnAs("app@viafront", "alice", "alice-pw", "sslmode=disable"))
	var pid1 int
	if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE via (v text); INSERT INTO via VALUES ('front')"); err != nil {
		t.Fatal(err)
	}
	if pid := int(c.PgConn().PID()); pid != pid1 {
		t.Errorf("the front reported pid %d, the backend is %d", pid, pid1)
	}
	// A cancel through the front reaches the backend on the node.
	done := make(chan error, 1)
	go func() { _, err := c.Exec(ctx, "SELECT pg_sleep(30)"); done <- err }()
	eventually(t, 20*time.Second, "the sleep to start on the node", func() bool {
		out, err := node.psql(t, "app@viafront", "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)'")
		return err == nil && out == "1"
	})
	if err := c.PgConn().CancelRequest(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if pgCode(err) != "57014" {
			t.Fatalf("cancelled sleep: %v, want 57014", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the cancel through the front did not reach the backend")
	}
	c.Close(ctx)
	b := node.branches()["viafront"]
	if id := mustStateID(t, state); b.Node != id {
		t.Fatalf("branch viafront is node %q's, want the node %q", b.Node, id)
	}
	if out, err := node.psql(t, "app@viafront", "SELECT v FROM via"); err != nil || out != "front" {
		t.Fatalf("the branch on the node: %q %v", out, err)
	}
	waitNoSessions(t, node, "viafront")

	// Again through the front: the node hands back its parked server session,
	// on the connection the front kept from the first session.
	accepted := metricValue(t, node.metrics(t), "pgbranch_proxy_connections_total")
	c = connectDSN(t, ctx, fr.dsnAs("app@viafront", "alice", "alice-pw", "sslmode=disable"))
	var pid2 int
	if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid2); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	if pid2 != pid1 {
		t.Errorf("second session on backend %d, want the reused %d", pid2, pid1)
	}
	if n := metricValue(t, node.metrics(t), "pgbranch_proxy_connections_total"); n != accepted {
		t.Errorf("the node accepted %v connections for a session through the front, want none: it takes the kept one", n-accepted)
	}
	eventually(t, 10*time.Second, "the front to keep its node connection twice", func() bool {
		return metricValue(t, scrape(t, metricsAddr), "pgbranch_proxy_node_connections_kept_total") >= 2
	})

	if m := scrape(t, metricsAddr); !strings.Contains(m, "pgbranch_proxy_connections_total") || strings.Contains(m, "pgbranch_branches") {
		t.Fatalf("the front's /metrics: want the proxy's metrics and no branch manager's:\n%s", m)
	}
	if err := tryConnect(fr.dsnAs("nosuchdb@x", "alice", "alice-pw", "sslmode=disable")); pgCode(err) != "3D000" {
		t.Fatalf("unknown database through the front: %v, want 3D000", err)
	}
	waitNoSessions(t, node, "viafront")

	// A session left when the front's --grace runs out is told 57P01, as at a
	// Postgres fast shutdown (front2: the first front still has checks to come).
	fr2 := startFront(t, url, "--auth", "scram-sha-256", "--grace", "1s")
	c = connectDSN(t, ctx, fr2.dsnAs("app@viafront", "alice", "alice-pw", "sslmode=disable"))
	slept := make(chan error, 1)
	go func() { _, err := c.Exec(ctx, "SELECT pg_sleep(30)"); slept <- err }()
	eventually(t, 20*time.Second, "the sleep to start on the node", func() bool {
		out, err := node.psql(t, "app@viafront", "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)'")
		return err == nil && out == "1"
	})
	fr2.stop()
	if err := <-slept; pgCode(err) != "57P01" {
		t.Errorf("a session through a front stopped under it: %v, want 57P01", err)
	}
	waitNoSessions(t, node, "viafront")

	node.stop()
	if err := tryConnect(fr.dsnAs("app@viafront", "alice", "alice-pw", "sslmode=disable")); pgCode(err) != "57P03" {
		t.Fatalf("branch of a stopped node: %v, want 57P03\n%s", err, fr.logs())
	}
}

func connectDSN(t *testing.T, ctx context.Context, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustStateID(t *testing.T, state string) string {
	t.Helper()
	id, err := branches.ReadStateID(state)
	if err != nil || id == "" {
		t.Fatalf("state id %q: %v", id, err)
	}
	return id
}

// scrape returns /metrics at addr.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

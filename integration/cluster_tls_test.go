package integration

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestClusterTLS: with the cluster's certificates, fronts reach a node with
// mutual TLS (sessions and cancels), the node takes its certificate's name as
// its node id, and a client that reaches the node directly is refused: without
// TLS, and with TLS but no front certificate.
func TestClusterTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, url := startCatalog(t, ctx)
	dir := makeCluster(t, []string{"node-a"}, []string{"front-1", "front-2"})
	state := newStateDir(t)
	node := startServer(t, state, "--catalog", url, "--role", "node", "--cluster-dir", dir, "--cluster-name", "node-a")
	node.seedSQL("app", lifecycleSQL)
	f1 := startFront(t, url, "--cluster-dir", dir, "--cluster-name", "front-1")
	f2 := startFront(t, url, "--cluster-dir", dir, "--cluster-name", "front-2")

	if out, err := f1.psql(t, "app@secure", "UPDATE t SET v = 'tls' WHERE id = 1 RETURNING v"); err != nil || out != "tls\nUPDATE 1" {
		t.Fatalf("a session through the front: %q %v\n%s\n%s", out, err, f1.logs(), node.logs())
	}
	// The next session through the front goes on the TLS connection the first
	// left open: the node accepts none.
	accepted := metricValue(t, node.metrics(t), "pgbranch_proxy_connections_total")
	if out, err := f1.psql(t, "app@secure", "SELECT v FROM t WHERE id = 1"); err != nil || out != "tls" {
		t.Fatalf("a second session through the front: %q %v", out, err)
	}
	if n := metricValue(t, node.metrics(t), "pgbranch_proxy_connections_total"); n != accepted {
		t.Errorf("the node accepted %v connections for the second session, want none", n-accepted)
	}
	if id := mustStateID(t, state); id != "node-a" {
		t.Fatalf("node id %q, want its certificate's name node-a", id)
	}
	if err := tryConnect(node.dsn("app@secure", "sslmode=disable")); pgCode(err) != "28000" {
		t.Fatalf("a client on the node without TLS: %v, want 28000", err)
	}
	if err := tryConnect(node.dsn("app@secure", "sslmode=require")); err == nil {
		t.Fatal("a client without a front certificate reached the node")
	}
	waitNoSessions(t, node, "secure")
	testCancelAcrossFronts(t, ctx, f1, f2, "secure")
	testAdminThroughFront(t, node, f2, "secure")
}

// testAdminThroughFront: the admin commands given to a front (here on its
// admin socket) are served by the branch's node: list, reset, destroy; the
// node's audit log names the caller and the front.
func testAdminThroughFront(t *testing.T, node, fr *server, branch string) {
	t.Helper()
	waitNoSessions(t, node, branch)
	if b, ok := fr.branches()[branch]; !ok || b.Node != "node-a" {
		t.Fatalf("branch ls through the front: %s is %+v (listed %v), want node-a's", branch, b, ok)
	}
	// Where clients connect is the front.
	if out := fr.mustCLI("info"); !strings.Contains(out, fr.addr) {
		t.Fatalf("info through the front does not name the front's address %s:\n%s", fr.addr, out)
	}
	fr.mustCLI("branch", "reset", branch)
	if out, err := fr.psql(t, "app@"+branch, "SELECT v FROM t WHERE id = 1"); err != nil || out != "seed" {
		t.Fatalf("after a reset through the front: %q %v, want the seed's row", out, err)
	}
	waitNoSessions(t, node, branch)
	fr.mustCLI("branch", "destroy", branch)
	if _, ok := node.branches()[branch]; ok {
		t.Fatalf("branch %s still on its node after a destroy through the front", branch)
	}
	audit := node.mustCLI("audit", "ls")
	if !strings.Contains(audit, "local via front-2") || !strings.Contains(audit, "branch.destroy") {
		t.Fatalf("the node's audit log does not name the front's caller:\n%s", audit)
	}
	if out, err := fr.cli("branch", "destroy", "no-such-branch"); err == nil {
		t.Fatalf("destroy of a branch no node holds through the front succeeded:\n%s", out)
	}
}

// makeCluster makes a cluster directory with a CA and the named nodes (for
// 127.0.0.1) and fronts, with the binary's cluster commands.
func makeCluster(t *testing.T, nodes, fronts []string) string {
	t.Helper()
	dir := t.TempDir()
	cmds := [][]string{{"cluster", "init", "--dir", dir}}
	for _, n := range nodes {
		cmds = append(cmds, []string{"cluster", "issue", "--dir", dir, "--role", "node", "--name", n, "--host", "127.0.0.1"})
	}
	for _, f := range fronts {
		cmds = append(cmds, []string{"cluster", "issue", "--dir", dir, "--role", "front", "--name", f})
	}
	for _, args := range cmds {
		if out, err := exec.Command(binPath, args...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	return dir
}

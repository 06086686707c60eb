package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
)

func nodeList(t *testing.T, s *server) []branches.NodeInfo {
	t.Helper()
	var ns []branches.NodeInfo
	if err := json.Unmarshal([]byte(s.mustCLI("node", "ls", "--json")), &ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

// TestNodeRegistration: serve registers its state directory as a node of its
// catalog, with its address, and renews the lease by heartbeats; after a restart
// the same node, in the same slot, has the next epoch, owns its branches under
// it, and serves them.
func TestNodeRegistration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, url := startCatalog(t, ctx)
	state := newStateDir(t)
	s := startServer(t, state, "--catalog", url)
	s.seedSQL("app", lifecycleSQL)
	mustWrite(t, s, "kept", "v1")
	id, err := branches.ReadStateID(state)
	if err != nil || id == "" {
		t.Fatalf("state id %q: %v", id, err)
	}

	var first branches.NodeInfo
	eventually(t, 20*time.Second, "the node with its address", func() bool {
		ns := nodeList(t, s)
		if len(ns) != 1 {
			t.Fatalf("node ls = %+v, want one node", ns)
		}
		first = ns[0]
		return first.Addr == s.addr
	})
	if first.ID != id || first.Slot != 1 || first.Epoch != 1 || first.State != "active" || !first.Self || first.LeaseAgeMS >= 0 {
		t.Fatalf("node = %+v, want %s in slot 1, epoch 1, active, this server, lease running", first, id)
	}
	eventually(t, 20*time.Second, "a heartbeat to move the lease", func() bool {
		return nodeList(t, s)[0].LeaseUntil.After(first.LeaseUntil)
	})
	if b := s.branches()["kept"]; b.Node != id {
		t.Fatalf("branch kept is node %q's, want %q", b.Node, id)
	}

	s.stop()
	s2 := startServer(t, state, "--catalog", url)
	ns := nodeList(t, s2)
	if len(ns) != 1 || ns[0].ID != id || ns[0].Slot != 1 || ns[0].Epoch != 2 || !ns[0].Self {
		t.Fatalf("after a restart node ls = %+v, want %s in slot 1 at epoch 2", ns, id)
	}
	if out, err := s2.psql(t, "app@kept", "SELECT v FROM t WHERE id = 1"); err != nil || out != "v1" {
		t.Fatalf("the branch after a restart: %q %v\n%s", out, err, s2.logs())
	}
	mustWrite(t, s2, "kept", "v2") // a wake and a write: fenced updates at epoch 2 pass
	mustWrite(t, s2, "new", "v3")
	if info := s2.mustCLI("info"); !strings.Contains(info, `"node_epoch": 2`) {
		t.Fatalf("info does not name epoch 2:\n%s", info)
	}
	table := s2.mustCLI("node", "ls")
	t.Logf("node ls:\n%s", table)
	if !strings.Contains(table, id+" (this server)") || !strings.Contains(table, s2.addr) {
		t.Fatalf("node ls:\n%s", table)
	}
}

// TestNodeLostRegistration: a branch whose row carries another epoch is fenced
// (its stop is refused, its server stopped, sessions get 57P03) while the other
// branches serve on; a serve whose registration is taken over (its epoch bumped
// in the catalog, as a second registration of its node would) notices at its
// first fenced write or heartbeat, whichever comes first, and stops every branch
// server, not only the one whose write was refused: a session held on another
// running branch ends (57P01 or a closed connection), its postmaster is gone,
// and new sessions get 57P03 naming the lost registration. serve stops cleanly,
// and once restarted (epoch 3) it adopts and serves all.
func TestNodeLostRegistration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, url := startCatalog(t, ctx)
	state := newStateDir(t)
	s := startServer(t, state, "--catalog", url)
	s.seedSQL("app", lifecycleSQL)
	mustWrite(t, s, "up", "v1")

	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// One branch's row carries another epoch: the next change of it is fenced,
	// and serve stops its server and serves it no more.
	mustWrite(t, s, "taken", "v0")
	if _, err := db.ExecContext(ctx, "UPDATE branches SET node_epoch = node_epoch + 100 WHERE name = 'taken'"); err != nil {
		t.Fatal(err)
	}
	if out, err := s.cli("branch", "stop", "taken"); err == nil || !strings.Contains(out, "no longer this node's") {
		t.Fatalf("branch stop of a fenced branch: %v\n%s", err, out)
	}
	if b := s.branches()["taken"]; b.State != "fenced" {
		t.Fatalf("branch ls shows the fenced branch as %+v", b)
	}
	c, err := s.connectErr("app@taken")
	if err == nil {
		c.Close(ctx)
	}
	if code := pgCode(err); code != "57P03" || !strings.Contains(err.Error(), "no longer served by this pgbranchproxy node") {
		t.Fatalf("a session on the fenced branch: %v (SQLSTATE %q), want 57P03\n%s", err, code, s.logs())
	}

	// Another running branch, with a session held on it, serves on.
	held := s.connect(t, "app@up")
	if _, err := held.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("a session on the running branch beside a fenced one: %v\n%s", err, s.logs())
	}
	mustWrite(t, s, "other", "v1")
	bs := s.branches()
	pids := map[string]int{"up": bs["up"].PID, "other": bs["other"].PID}
	for name, pid := range pids {
		if pid == 0 || !slices.Contains(postmastersUnder(state), pid) {
			t.Fatalf("branch %s runs as pid %d, not among the postmasters %v", name, pid, postmastersUnder(state))
		}
	}

	if _, err := db.ExecContext(ctx, "UPDATE nodes SET epoch = epoch + 1"); err != nil {
		t.Fatal(err)
	}
	// The first fenced write, unless a heartbeat came first, finds the
	// registration gone; either way it is refused for the node, not the branch.
	if out, err := s.cli("branch", "stop", "other"); err == nil || !strings.Contains(out, "lost its registration") {
		t.Fatalf("branch stop after the registration was lost: %v\n%s", err, out)
	}
	eventually(t, 20*time.Second, "every branch server to stop", func() bool {
		left := postmastersUnder(state)
		return !slices.Contains(left, pids["up"]) && !slices.Contains(left, pids["other"])
	})
	if _, err := held.Exec(ctx, "SELECT 1"); err == nil || pgCode(err) != "57P01" && !held.IsClosed() {
		t.Fatalf("the held session after its server was stopped: %v (SQLSTATE %q), want 57P01 or a closed connection", err, pgCode(err))
	}
	if !strings.Contains(s.mustCLI("info"), `"node_lost": true`) {
		t.Fatalf("info does not say the node is lost:\n%s", s.mustCLI("info"))
	}
	for _, db := range []string{"app@new", "app@up"} {
		c, err = s.connectErr(db)
		if err == nil {
			c.Close(ctx)
		}
		if code := pgCode(err); code != "57P03" || !strings.Contains(err.Error(), "lost its registration") {
			t.Fatalf("a session on %s after the registration was lost: %v (SQLSTATE %q), want 57P03 naming the lost registration\n%s", db, err, code, s.logs())
		}
	}
	if b := s.branches()["up"]; b.State != "fenced" || !strings.Contains(b.Error, "lost its registration") {
		t.Fatalf("branch ls shows the stopped branch as %+v", b)
	}

	s.stop()
	assertNothingLeft(t, state)
	s2 := startServer(t, state, "--catalog", url)
	if ns := nodeList(t, s2); len(ns) != 1 || ns[0].Epoch != 3 {
		t.Fatalf("after a restart node ls = %+v, want epoch 3", ns)
	}
	mustWrite(t, s2, "new", "v2")
	for branch, want := range map[string]string{"up": "v1", "taken": "v0", "other": "v1"} {
		if out, err := s2.psql(t, "app@"+branch, "SELECT v FROM t WHERE id = 1"); err != nil || out != want {
			t.Fatalf("app@%s after a restart: %q %v, want %q\n%s", branch, out, err, want, s2.logs())
		}
	}
}

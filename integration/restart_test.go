package integration

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestDeclaredDeadExits: a node cut off from the catalog for longer than its
// lease and the other node's --node-dead-after is declared dead; when it reaches
// the catalog again it stops its branch servers and exits with 75, for its
// supervisor to start it again; started again, it registers under a new epoch
// and serves new branches.
func TestDeclaredDeadExits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, url := startCatalog(t, ctx)
	a := startServer(t, newStateDir(t), "--catalog", url, "--role", "node", "--node-dead-after", "1s")
	relayURL, stall := stallRelay(t, url)
	stateB := newStateDir(t)
	b := startServer(t, stateB, "--catalog", relayURL, "--role", "node", "--node-dead-after", "1s")
	b.seedSQL("app", lifecycleSQL)
	mustPsql(t, b, "app@before", "SELECT 1")
	epoch := func() int64 {
		for _, n := range nodeList(t, a) {
			if n.ID == mustStateID(t, stateB) {
				return n.Epoch
			}
		}
		t.Fatal("node b is not in the catalog")
		return 0
	}
	first := epoch()

	stall(true)
	eventually(t, 60*time.Second, "node b declared dead", func() bool { return nodeState(t, a, b) == "dead" })
	stall(false)
	select {
	case <-b.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("node b did not exit after it was declared dead:\n%s", b.logs())
	}
	if code := b.cmd.ProcessState.ExitCode(); code != 75 {
		t.Fatalf("node b exited with %d, want 75:\n%s", code, b.logs())
	}
	if !strings.Contains(b.logs(), "declared this node dead") {
		t.Fatalf("node b's log does not say why it exited:\n%s", b.logs())
	}
	if pids := postmastersUnder(stateB); len(pids) != 0 {
		t.Fatalf("node b left postmasters %v", pids)
	}

	b.start()
	if e := epoch(); e != first+1 {
		t.Fatalf("node b registered at epoch %d, want %d", e, first+1)
	}
	mustPsql(t, b, "app@after", "SELECT 1")
}

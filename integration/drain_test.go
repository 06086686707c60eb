package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestNodeDrain: a drained node gets no new branch through a front and creates
// none itself (57P03 for a client that reaches it directly), while its branches
// go on serving; it stays drained across a restart, and takes new branches again
// once resumed.
func TestNodeDrain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, url := startCatalog(t, ctx)
	a := startServer(t, newStateDir(t), "--catalog", url, "--role", "node")
	b := startServer(t, newStateDir(t), "--catalog", url, "--role", "node", "--reap-interval", "500ms")
	a.seedSQL("app", lifecycleSQL)
	fr := startFront(t, url)
	waitSeedCopy(t, b, "app")

	onB := ""
	for i := 0; onB == ""; i++ {
		name := fmt.Sprintf("before%d", i)
		mustPsql(t, fr, "app@"+name, "UPDATE t SET v = '"+name+"' WHERE id = 1")
		if _, ok := b.branches()[name]; ok {
			onB = name
		}
	}
	waitNoSessions(t, b, onB)
	idB := mustStateID(t, b.state)
	if out := b.mustCLI("node", "drain"); !strings.Contains(out, idB+": draining") {
		t.Fatalf("node drain: %q", out)
	}
	if st := nodeState(t, a, b); st != "draining" {
		t.Fatalf("node ls on a says b is %q, want draining", st)
	}
	newNames := func(prefix string) (onA, onB int) {
		for i := range 12 {
			name := fmt.Sprintf("%s%d", prefix, i)
			mustPsql(t, fr, "app@"+name, "SELECT 1")
			if _, ok := b.branches()[name]; ok {
				onB++
			} else {
				onA++
			}
		}
		return onA, onB
	}
	if _, n := newNames("drained"); n != 0 {
		t.Fatalf("%d new branches placed on the drained node", n)
	}
	if out, err := fr.psql(t, "app@"+onB, "SELECT v FROM t WHERE id = 1"); err != nil || out != onB {
		t.Fatalf("a branch of the drained node: %q %v", out, err)
	}
	if err := tryConnect(b.dsn("app@direct")); pgCode(err) != "57P03" {
		t.Fatalf("a new branch asked of the drained node itself: %v, want 57P03", err)
	}

	b.stop()
	b.start()
	if st := nodeState(t, a, b); st != "draining" {
		t.Fatalf("after a restart b is %q, want still draining", st)
	}
	a.mustCLI("node", "resume", idB)
	if _, n := newNames("resumed"); n == 0 {
		t.Fatal("no new branch placed on the resumed node")
	}
}

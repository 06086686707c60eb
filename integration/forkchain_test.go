package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestForkStoppedParent: a stopped parent is forked without being started, its
// children share one copy of its state, an idle running parent is stopped to be
// forked, and every child reads its parent's writes.
func TestForkStoppedParent(t *testing.T) {
	s := startServer(t, newStateDir(t))
	s.seedSQL("shop", shopSQL)
	if _, err := s.psql(t, "shop@p", "UPDATE accounts SET owner = 'p' WHERE id <= 7"); err != nil {
		t.Fatal(err)
	}
	waitSessions(t, s, "p")
	s.mustCLI("branch", "stop", "p")
	for _, c := range []string{"c1", "c2"} {
		out, err := s.psql(t, "shop@"+c+" options=-cpgbranch.from=p", "SELECT count(*) FROM accounts WHERE owner = 'p'")
		if err != nil || out != "7" {
			t.Fatalf("%s reads %q (%v), want 7\n%s", c, out, err, s.logs())
		}
		if b := s.branches()["p"]; b.State != "stopped" || b.PID != 0 {
			t.Fatalf("forking %s started the stopped parent: %+v", c, b)
		}
	}
	if n := strings.Count(s.logs(), `"how": "stopped"`); n != 1 {
		t.Errorf("the stopped parent was copied %d times for two children, want once\n%s", n, s.logs())
	}
	// The two children are independent of each other.
	if _, err := s.psql(t, "shop@c1", "UPDATE accounts SET owner = 'c1' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	if out, _ := s.psql(t, "shop@c2", "SELECT owner FROM accounts WHERE id = 1"); out != "p" {
		t.Errorf("c2 reads %q after c1's write, want p", out)
	}

	// An idle running parent is stopped, forked, and woken by its next session.
	if _, err := s.psql(t, "shop@q", "CREATE TABLE q_only AS SELECT 42 AS x"); err != nil {
		t.Fatal(err)
	}
	waitSessions(t, s, "q")
	if out, err := s.psql(t, "shop@qc options=-cpgbranch.from=q", "SELECT x FROM q_only"); err != nil || out != "42" {
		t.Fatalf("child of an idle parent reads %q (%v)\n%s", out, err, s.logs())
	}
	if b := s.branches()["q"]; b.State != "stopped" {
		t.Errorf("idle parent after the fork: %s, want stopped", b.State)
	}
	if out, err := s.psql(t, "shop@q", "SELECT x FROM q_only"); err != nil || out != "42" {
		t.Errorf("parent after being forked while idle: %q %v", out, err)
	}
}

// TestForkDeepChain forks a chain 12 deep, alternating stopped parents and parents
// with an open session, with a dropped table and deleted rows on the way: every
// level reads exactly its ancestors' writes, and with --max-layers 8 no branch is
// mounted with more than eight read-only layers (deeper chains flatten).
func TestForkDeepChain(t *testing.T) {
	s := startServer(t, newStateDir(t), "--idle-stop", "1h", "--max-layers", "8")
	s.seedSQL("shop", shopSQL)
	ctx := context.Background()
	if _, err := s.psql(t, "shop@d0", "CREATE TABLE chain (d int); CREATE TABLE doomed (x int)"); err != nil {
		t.Fatal(err)
	}
	const depth = 12
	for d := 1; d <= depth; d++ {
		parent := fmt.Sprintf("d%d", d-1)
		name := fmt.Sprintf("d%d", d)
		var hold interface{ Close(context.Context) error }
		if d%2 == 0 { // online fork: the parent has a session open
			hold = s.connect(t, "shop@"+parent)
		} else {
			waitSessions(t, s, parent)
		}
		sql := fmt.Sprintf("INSERT INTO chain VALUES (%d); DELETE FROM accounts WHERE id = %d", d, d)
		if d == 3 {
			sql += "; DROP TABLE doomed"
		}
		if _, err := s.psql(t, "shop@"+name+" options=-cpgbranch.from="+parent, sql); err != nil {
			t.Fatalf("depth %d: %v\n%s", d, err, s.logs())
		}
		if hold != nil {
			hold.Close(ctx)
		}
	}
	out, err := s.psql(t, "shop@d12", "SELECT string_agg(d::text, ',' ORDER BY d) || ' ' || (SELECT count(*) FROM accounts) || ' ' || (to_regclass('doomed') IS NULL) FROM chain")
	if want := "1,2,3,4,5,6,7,8,9,10,11,12 19988 true"; err != nil || out != want {
		t.Fatalf("depth 12 reads %q (%v), want %q\n%s", out, err, want, s.logs())
	}
	if out, err := s.psql(t, "shop@d2", "SELECT count(*) FROM chain"); err != nil || out != "2" {
		t.Errorf("depth 2 after the chain grew below it: %q %v", out, err)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if !strings.Contains(line, s.state) || !strings.Contains(line, "lowerdir=") {
			continue
		}
		opts := line[strings.Index(line, "lowerdir=")+len("lowerdir="):]
		opts, _, _ = strings.Cut(opts, ",")
		if n := len(strings.Split(opts, ":")); n > 8 {
			t.Errorf("a branch is mounted with %d read-only layers: %s", n, line)
		}
	}
	if !strings.Contains(s.logs(), `"flattened": true`) {
		t.Errorf("a chain 12 deep never flattened")
	}
}

// waitSessions waits until the proxy has seen name's sessions end.
func waitSessions(t *testing.T, s *server, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.branches()[name].Sessions != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("branch %s still has sessions", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

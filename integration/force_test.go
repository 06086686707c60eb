package integration

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestForceEndsSessions: reset, stop and destroy refuse a branch with an open
// session and say that --force ends it; with --force the session's client is told
// 57P01, the operation is done, and a session on another branch goes on.
func TestForceEndsSessions(t *testing.T) {
	t.Parallel()
	s := startServer(t, newStateDir(t))
	s.seedSQL("app", "CREATE TABLE t (i int); INSERT INTO t VALUES (1);")
	ctx := context.Background()
	other := s.connect(t, "app@bystander")
	if _, err := other.Exec(ctx, "BEGIN; INSERT INTO t VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"reset", "stop", "destroy"} {
		c := s.connect(t, "app@held")
		if _, err := c.Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := s.cliCode("branch", op, "held")
		if code != 1 || !strings.Contains(errOut, "open sessions") || !strings.Contains(errOut, "--force") {
			t.Fatalf("branch %s with a session: exit %d: %s", op, code, errOut)
		}
		if _, err := c.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatalf("session after a refused %s: %v", op, err)
		}
		ended := make(chan error, 1)
		go func() {
			_, err := c.Exec(ctx, "SELECT pg_sleep(30)")
			ended <- err
		}()
		time.Sleep(200 * time.Millisecond)
		if _, errOut, code := s.cliCode("branch", op, "held", "--force"); code != 0 {
			t.Fatalf("branch %s --force: exit %d: %s", op, code, errOut)
		}
		select {
		case err := <-ended:
			if pgCode(err) != "57P01" {
				t.Errorf("session under branch %s --force ended with %v, want SQLSTATE 57P01", op, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("session under branch %s --force still running", op)
		}
		c.Close(ctx)
		b, ok := s.branches()["held"]
		switch {
		case op == "destroy" && ok:
			t.Errorf("branch still listed after destroy --force: %+v", b)
		case op == "stop" && b.State != "stopped":
			t.Errorf("after stop --force: state %q", b.State)
		case op == "reset":
			if out, err := s.psql(t, "app@held", "SELECT count(*) FROM t"); err != nil || out != "1" {
				t.Errorf("after reset --force: %q %v", out, err)
			}
		}
	}
	// A new session on the name gets a new branch; the other branch's open
	// transaction was never touched.
	if out, err := s.psql(t, "app@held", "SELECT count(*) FROM t"); err != nil || out != "1" {
		t.Errorf("new branch after destroy --force: %q %v", out, err)
	}
	var n int
	if err := other.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Errorf("the other branch's session: count %d, %v", n, err)
	}
	if _, err := other.Exec(ctx, "COMMIT"); err != nil {
		t.Error(err)
	}
}

package integration

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// TestKill9AndRestart kills serve with branches running, restarts it on the same
// state directory, and checks that reconcile cleaned up and the data is served.
func TestKill9AndRestart(t *testing.T) {
	state := newStateDir(t)
	s := startServer(t, state)
	s.seedSQL("shop", shopSQL)
	ctx := context.Background()
	for _, b := range []string{"k1", "k2"} {
		c := s.connect(t, "shop@"+b)
		if _, err := c.Exec(ctx, "UPDATE accounts SET owner = '"+b+"' WHERE id = 1"); err != nil {
			t.Fatal(err)
		}
	}
	before := postmastersUnder(state)
	if len(before) != 2 {
		t.Fatalf("%d postmasters running, want 2", len(before))
	}
	s.kill9()
	if len(postmastersUnder(state)) != 2 {
		t.Fatalf("branch servers did not outlive serve (kill -9 should leave them)")
	}

	s2 := startServer(t, state)
	for _, pid := range postmastersUnder(state) {
		for _, old := range before {
			if pid == old {
				t.Errorf("postmaster %d of the killed run is still running after restart", pid)
			}
		}
	}
	for name, b := range s2.branches() {
		if b.State != "stopped" {
			t.Errorf("branch %s after reconcile: %s, want stopped", name, b.State)
		}
	}
	for _, b := range []string{"k1", "k2"} {
		out, err := s2.psql(t, "shop@"+b, "SELECT owner FROM accounts WHERE id = 1")
		if err != nil || out != b {
			t.Errorf("branch %s after restart: %q %v\n%s", b, out, err, s2.logs())
		}
	}
	s2.stop()
	// newStateDir's cleanup asserts that no mount and no postmaster is left.
}

// TestShutdownEndsSessionsWith57P01: on SIGTERM a session still open after the grace
// period is ended by its branch server, so the client hears why.
func TestShutdownEndsSessionsWith57P01(t *testing.T) {
	s := startServer(t, newStateDir(t), "--grace", "500ms")
	s.seedSQL("shop", shopSQL)
	c := s.connect(t, "shop@open")
	go func() {
		time.Sleep(200 * time.Millisecond)
		s.cmd.Process.Signal(syscall.SIGTERM)
	}()
	_, err := c.Exec(context.Background(), "SELECT pg_sleep(5)")
	if code := pgCode(err); code != "57P01" {
		t.Fatalf("session at shutdown ended with %v, want SQLSTATE 57P01", err)
	}
	select {
	case <-s.exited:
		if code := s.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("serve exited %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit")
	}
}

// TestKill9EndsEphemeralSessions: a kill -9 of serve ends the sessions of its
// ephemeral branches, and the next run knows it: the branch claimed from the pool,
// the one made by the admin API and then used, and the one made ephemeral by
// `branch set` while in use after an earlier session are gone for clients and
// destroyed, while the ephemeral branch no session has used yet is kept.
func TestKill9EndsEphemeralSessions(t *testing.T) {
	state := newStateDir(t)
	s := startServer(t, state, "--warm", "1", "--reap-interval", "200ms")
	s.seedSQL("app", lifecycleSQL)
	waitPool(t, s, 1)
	for _, name := range []string{"made", "unused"} {
		if out, err := s.cli("branch", "create", name, "--ephemeral"); err != nil {
			t.Fatalf("branch create %s: %v\n%s", name, err, out)
		}
	}
	ctx := context.Background()
	for _, name := range []string{"claimed", "made"} {
		c := s.connect(t, "app@"+name, ephOption)
		if _, err := c.Exec(ctx, "UPDATE t SET v = 'written' WHERE id = 1"); err != nil {
			t.Fatal(err)
		}
		// Left open: the kill ends it.
	}
	// A branch made ephemeral while in use, after a session of its own had ended
	// (created by the admin API: a claim would record its sessions itself).
	s.mustCLI("branch", "create", "marked")
	c := s.connect(t, "app@marked")
	c.Close(ctx)
	s.connect(t, "app@marked") // left open
	s.mustCLI("branch", "set", "marked", "--ephemeral=true")
	s.kill9()

	s2 := startServer(t, state, "--reap-interval", "200ms")
	c = s2.connect(t, "app@claimed", ephOption)
	if v, err := rowOne(c); err != nil || v != "seed" {
		t.Errorf("a connection to the ephemeral branch in use at the kill sees %q (%v), want a new branch with the seed's row", v, err)
	}
	c.Close(ctx)
	eventually(t, 10*time.Second, "the ephemeral branches used before the kill destroyed", func() bool {
		b := s2.branches()
		_, claimed := b["claimed"]
		_, made := b["made"]
		_, marked := b["marked"]
		return !claimed && !made && !marked
	})
	if _, ok := s2.branches()["unused"]; !ok {
		t.Errorf("the ephemeral branch no session used was destroyed after the restart\n%s", s2.logs())
	}
	s2.stop()
}

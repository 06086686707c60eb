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

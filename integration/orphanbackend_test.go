package integration

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// busyQuery keeps a backend computing for far longer than any test runs, without
// waiting on anything: such a backend runs on after its postmaster has died.
const busyQuery = "SELECT count(*) FROM generate_series(1, 100000) a, generate_series(1, 100000) b"

// startBusy runs busyQuery on a new session of app@branch and returns its
// backend's pid and the query's outcome, once the query runs. The backend is
// killed at the end of the test in case the server under test left it.
func startBusy(t *testing.T, s *server, branch string) (int, <-chan error) {
	t.Helper()
	ctx := context.Background()
	c := s.connect(t, "app@"+branch)
	var pid int
	if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, busyQuery)
		done <- err
	}()
	watch := s.connect(t, "app@"+branch)
	eventually(t, 30*time.Second, "the busy query running", func() bool {
		var n int
		err := watch.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active'", pid).Scan(&n)
		return err == nil && n == 1
	})
	watch.Close(ctx)
	return pid, done
}

// TestPostmasterKilledUnderBusyBackend: a branch's postmaster killed while one of
// its backends computes a long query leaves that backend running, in the branch's
// data directory. Serve ends it with the server: the branch is served again at
// the next connection, with what was committed, instead of failing to unmount
// until the query ends; the busy session's client hears 57P01.
func TestPostmasterKilledUnderBusyBackend(t *testing.T) {
	killUnderBusyBackend(t, newStateDir(t))
}

// TestPostmasterKilledUnderBusyBackendLinkedState is
// TestPostmasterKilledUnderBusyBackend with a state directory named through a
// symbolic link (a volume linked into place), which a process's working directory
// does not show.
func TestPostmasterKilledUnderBusyBackendLinkedState(t *testing.T) {
	state := newStateDir(t)
	if err := os.Mkdir(state, 0o711); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(filepath.Dir(state), "linked")
	if err := os.Symlink(state, linked); err != nil {
		t.Fatal(err)
	}
	killUnderBusyBackend(t, linked)
}

// killUnderBusyBackend is TestPostmasterKilledUnderBusyBackend on state.
func killUnderBusyBackend(t *testing.T, state string) {
	s := startServer(t, state, "--relay", "epoll") // the kernel relay does not tell (README)
	s.seedSQL("app", lifecycleSQL)
	mustWrite(t, s, "busy", "committed")
	_, done := startBusy(t, s, "busy")
	if err := syscall.Kill(s.branches()["busy"].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if code := pgCode(err); code != "57P01" {
			t.Errorf("the busy session after its postmaster was killed: %v, want SQLSTATE 57P01", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the busy session did not end after its postmaster was killed\n%s", s.logs())
	}
	c, err := pgx.Connect(context.Background(), s.dsn("app@busy"))
	if err != nil {
		t.Fatalf("connect after the postmaster was killed: %v\n%s", err, s.logs())
	}
	defer c.Close(context.Background())
	if v, err := rowOne(c); err != nil || v != "committed" {
		t.Errorf("after the kill: v = %q (%v), want %q", v, err, "committed")
	}
}

// TestRestartWithOrphanedBackend: serve killed, then a branch's postmaster killed
// while a backend of it computes a long query. The next serve starts (reconcile
// ends the backend the dead postmaster left instead of failing to unmount its
// branch), and the branch serves what was committed.
func TestRestartWithOrphanedBackend(t *testing.T) {
	state := newStateDir(t)
	s := startServer(t, state)
	s.seedSQL("app", lifecycleSQL)
	mustWrite(t, s, "busy", "committed")
	startBusy(t, s, "busy")
	postmaster := s.branches()["busy"].PID
	s.kill9()
	if err := syscall.Kill(postmaster, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s2 := startServer(t, state)
	mustRead(t, s2, "busy", "committed")
}

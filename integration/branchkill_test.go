package integration

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestBranchServerKilledUnderSessions kills a branch's postmaster with SIGKILL
// while clients wait in queries, over the epoll relay and over TLS (the goroutine
// relay). A backend waiting in a query when its postmaster dies exits without a
// word, so each client hears from the proxy: a FATAL with SQLSTATE 57P01, as an
// idle session hears from Postgres itself. The next connection wakes the branch,
// which has what was committed before the kill and not what was not.
func TestBranchServerKilledUnderSessions(t *testing.T) {
	// The kernel relay does not tell a spliced session (README): on the epoll loop.
	s := startServer(t, newStateDir(t), "--tls-auto", "--relay", "epoll")
	s.seedSQL("app", lifecycleSQL)
	mustWrite(t, s, "pk", "committed")
	ctx := context.Background()
	plain := s.connect(t, "app@pk")
	tlsConn := s.connect(t, "app@pk", "sslmode=require")
	if _, err := tlsConn.Exec(ctx, "BEGIN; UPDATE t SET v = 'uncommitted' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for _, c := range []*pgx.Conn{plain, tlsConn} {
		go func() {
			_, err := c.Exec(ctx, "SELECT pg_sleep(60)")
			errs <- err
		}()
	}
	watch := s.connect(t, "app@pk")
	eventually(t, 30*time.Second, "both sessions in pg_sleep", func() bool {
		var n int
		err := watch.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'").Scan(&n)
		return err == nil && n == 2
	})
	pid := s.branches()["pk"].PID
	if pid == 0 {
		t.Fatal("branch pk has no postmaster pid")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-errs:
			if code := pgCode(err); code != "57P01" {
				t.Errorf("a session in a query when its branch server was killed got %v, want SQLSTATE 57P01", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("a session in a query did not end after its branch server was killed\n%s", s.logs())
		}
	}
	next := s.connect(t, "app@pk")
	if v, err := rowOne(next); err != nil || v != "committed" {
		t.Errorf("after the kill: v = %q (%v), want the committed %q\n%s", v, err, "committed", s.logs())
	}
}

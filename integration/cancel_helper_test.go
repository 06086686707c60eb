package integration

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// cancelWhenRunning sends a cancel request for c once another session, opened with
// watchDSN on the same branch, sees a query containing marker active in
// pg_stat_activity: the cancel then reaches a running query, whatever the machine's
// speed. It returns at once; the cancel is sent from a goroutine.
func cancelWhenRunning(t *testing.T, watchDSN string, c *pgx.Conn, marker string) {
	t.Helper()
	go func() {
		defer c.PgConn().CancelRequest(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		w, err := pgx.Connect(ctx, watchDSN)
		if err != nil {
			t.Errorf("watch for %q: %v", marker, err)
			return
		}
		defer w.Close(context.Background())
		for {
			var n int
			err := w.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE state = 'active' AND pid <> pg_backend_pid() AND strpos(query, $1) > 0`, marker).Scan(&n)
			if err != nil {
				t.Errorf("watch for %q: %v", marker, err)
				return
			}
			if n > 0 {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
}

package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServerLogRotated: a branch server told to log every statement keeps its
// postgres.log near --server-log-max: the reaper moves it to postgres.log.1 and the
// server goes on writing at the start of an empty postgres.log.
func TestServerLogRotated(t *testing.T) {
	t.Parallel()
	state := newStateDir(t)
	s := startServer(t, state, "--server-log-max", "256kB", "--reap-interval", "1s")
	s.seedSQL("app", "CREATE TABLE t (id int);")
	ctx := context.Background()
	c := s.connect(t, "app@chatty")
	defer c.Close(ctx)
	for _, q := range []string{"ALTER SYSTEM SET log_statement = 'all'", "SELECT pg_reload_conf()"} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(state, "branches", "*", "postgres.log"))
	if len(logs) != 1 {
		t.Fatalf("found server logs %q, want one", logs)
	}
	log := logs[0]
	big := "SELECT '" + strings.Repeat("x", 64<<10) + "'"
	for i := 0; i < 8; i++ { // about 512 kB of log lines
		if _, err := c.Exec(ctx, big); err != nil {
			t.Fatal(err)
		}
	}
	// Rotated at a reaper pass, perhaps twice (a pass may come mid-way).
	deadline := time.Now().Add(15 * time.Second)
	for {
		old, oerr := os.Stat(log + ".1")
		cur, cerr := os.Stat(log)
		if oerr == nil && cerr == nil && old.Size() > 64<<10 && cur.Size() <= 256<<10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("postgres.log not rotated within 15s: postgres.log %v, postgres.log.1 %v", cur, oerr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := c.Exec(ctx, "SELECT 'after the rotation'"); err != nil {
		t.Fatal(err)
	}
	// The server writes on into the log it holds open.
	deadline = time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(log)
		b1, _ := os.ReadFile(log + ".1")
		if strings.Contains(string(b), "after the rotation") || strings.Contains(string(b1), "after the rotation") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's next statement is in neither log (%d and %d bytes)", len(b), len(b1))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

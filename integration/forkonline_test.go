package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestForkOnlineFanOut: agents fork one parent at once while its sessions are open,
// one of them switching WAL segments and checkpointing throughout (as a parent that
// writes a lot does, and as each fork's own backup does): every fork is created and
// reads the parent's committed rows, none of its open transaction's, though the
// checkpoints recycle the parent's WAL segments and remove its files during the copies.
func TestForkOnlineFanOut(t *testing.T) {
	s := startServer(t, newStateDir(t), "--idle-stop", "1h")
	s.seedSQL("shop", shopSQL)
	ctx := context.Background()
	parent := s.connect(t, "shop@agent")
	if _, err := parent.Exec(ctx, "CREATE TABLE plan (step int); INSERT INTO plan VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	// An open transaction with uncommitted writes: no fork may see them.
	if _, err := parent.Exec(ctx, "BEGIN; INSERT INTO plan VALUES (99); DELETE FROM plan WHERE step = 1"); err != nil {
		t.Fatal(err)
	}
	busy := s.connect(t, "shop@agent")
	stop := make(chan struct{})
	churned := make(chan error, 1)
	go func() {
		for n := 0; ; n++ {
			select {
			case <-stop:
				churned <- nil
				return
			default:
			}
			// A temporary table's files go when its transaction ends: files vanish
			// under the copies.
			sql := fmt.Sprintf("CREATE TEMP TABLE churn%d ON COMMIT DROP AS SELECT * FROM accounts", n)
			if _, err := busy.Exec(ctx, "BEGIN; "+sql+"; COMMIT; SELECT pg_switch_wal(); CHECKPOINT"); err != nil {
				churned <- err
				return
			}
		}
	}()
	const rounds, fan = 3, 8
	errs := make(chan error, rounds*fan)
	for r := range rounds {
		var wg sync.WaitGroup
		for i := range fan {
			wg.Go(func() {
				name := fmt.Sprintf("try-%d-%d", r, i)
				c, err := pgx.Connect(ctx, s.dsn("shop@"+name, "options=-cpgbranch.from=agent"))
				if err != nil {
					errs <- fmt.Errorf("fork %s: %w", name, err)
					return
				}
				defer c.Close(ctx)
				var got string
				if err := c.QueryRow(ctx, "SELECT string_agg(step::text, ',' ORDER BY step) FROM plan").Scan(&got); err != nil || got != "1,2" {
					errs <- fmt.Errorf("fork %s reads %q (%v), want 1,2", name, got, err)
				}
			})
		}
		wg.Wait()
	}
	close(stop)
	if err := <-churned; err != nil {
		t.Errorf("the parent's busy session: %v", err)
	}
	close(errs)
	for err := range errs {
		t.Errorf("%v", err)
	}
	if t.Failed() {
		t.Fatalf("server log:\n%s", s.logs())
	}
	if _, err := parent.Exec(ctx, "COMMIT"); err != nil {
		t.Fatalf("the parent's transaction after the forks: %v", err)
	}
}

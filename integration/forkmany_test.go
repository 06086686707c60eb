package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestForkTreeUnderMaxRunning: three clients each grow a chain of forks, one
// session at a time, with --max-running 4. Every fork succeeds (a creation waits
// for a server that is already stopping instead of refusing with 53300), every
// child reads exactly its ancestors' writes, and at the end the branches outnumber
// the servers allowed to run.
func TestForkTreeUnderMaxRunning(t *testing.T) {
	s := startServer(t, newStateDir(t), "--max-running", "4", "--idle-stop", "2s", "--reap-interval", "200ms")
	s.seedSQL("shop", shopSQL)
	if _, err := s.psql(t, "shop@root", "CREATE TABLE chain (w int, d int)"); err != nil {
		t.Fatal(err)
	}
	const workers, depth = 3, 5
	var wg sync.WaitGroup
	errs := make(chan error, workers*depth)
	for w := range workers {
		wg.Go(func() {
			parent := "root"
			for d := 1; d <= depth; d++ {
				name := fmt.Sprintf("w%d-d%d", w, d)
				ctx := context.Background()
				c, err := pgx.Connect(ctx, s.dsn("shop@"+name, "options=-cpgbranch.from="+parent))
				if err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
					return
				}
				var n int
				_, err = c.Exec(ctx, fmt.Sprintf("INSERT INTO chain VALUES (%d, %d)", w, d))
				if err == nil {
					err = c.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM chain WHERE w = %d", w)).Scan(&n)
				}
				c.Close(ctx)
				if err != nil || n != d {
					errs <- fmt.Errorf("%s reads %d rows of its chain (%v), want %d", name, n, err, d)
					return
				}
				parent = name
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("%v", err)
	}
	if t.Failed() {
		t.Fatalf("server log:\n%s", s.logs())
	}
	running := 0
	all := s.branches()
	for _, b := range all {
		if b.State == "running" {
			running++
		}
	}
	if len(all) != 1+workers*depth || running > 4 {
		t.Errorf("%d branches, %d running with --max-running 4", len(all), running)
	}
}

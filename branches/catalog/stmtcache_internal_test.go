package catalog

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
)

// TestStmtCache: a statement first run in a transaction is prepared once the
// transaction has ended and used by the next; one run outside a transaction is
// prepared at once; transactions and statements outside them run side by side on
// the one connection without waiting on each other's prepares.
func TestStmtCache(t *testing.T) {
	c, err := openSQLite(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.db.ExecContext(ctx, `CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER)`); err != nil {
		t.Fatal(err)
	}
	const ins = `INSERT INTO kv (k, v) VALUES (?, ?)`
	cached := func(q string) bool {
		c.stmts.mu.Lock()
		defer c.stmts.mu.Unlock()
		return c.stmts.stmts[q] != nil
	}
	if err := c.tx(ctx, func(tx sqlTx) error {
		_, err := tx.exec(ctx, ins, "a", 1)
		if cached(ins) {
			t.Error("a statement was prepared while its transaction held the connection")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !cached(ins) {
		t.Fatal("a statement run in a transaction is not prepared after it")
	}
	if err := c.tx(ctx, func(tx sqlTx) error { _, err := tx.exec(ctx, ins, "b", 2); return err }); err != nil {
		t.Fatal(err)
	}
	const get = `SELECT v FROM kv WHERE k = ?`
	var v int
	if err := c.queryRow(ctx, get, "b").Scan(&v); err != nil || v != 2 {
		t.Fatalf("prepared insert then query: %d, %v", v, err)
	}
	if !cached(get) {
		t.Error("a statement run outside a transaction is not prepared")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 20 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs <- c.tx(ctx, func(tx sqlTx) error {
				_, err := tx.exec(ctx, `UPDATE kv SET v = v + ? WHERE k = ?`, i, "a")
				return err
			})
		}()
		go func() {
			defer wg.Done()
			var n int
			errs <- c.queryRow(ctx, `SELECT count(*) FROM kv WHERE v >= ?`, i).Scan(&n)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if err := c.queryRow(ctx, get, "a").Scan(&v); err != nil || v != 1+190 {
		t.Fatalf("a after 20 updates: %d, %v, want 191", v, err)
	}
}

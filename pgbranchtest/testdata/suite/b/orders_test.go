package b

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgbranchproxy/pgbranchproxy/pgbranchtest"
	"github.com/pgbranchproxy/pgbranchproxy/pgbranchtest/testdata/suite"
)

// querier is what pgx.Conn and pgxpool.Pool share here.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// TestOrders runs 15 parallel tests, with pgx.Conn and pgxpool.Pool in turn.
func TestOrders(t *testing.T) {
	ctx := context.Background()
	for i := range 15 {
		t.Run(fmt.Sprintf("order_%02d", i), func(t *testing.T) {
			t.Parallel()
			url := pgbranchtest.URL(t, suite.Migrations)
			var q querier
			if i%2 == 0 {
				conn, err := pgx.Connect(ctx, url)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { conn.Close(ctx) })
				q = conn
			} else {
				pool, err := pgxpool.New(ctx, url)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(pool.Close)
				q = pool
			}
			var n int
			if err := q.QueryRow(ctx, "INSERT INTO orders (user_id, total) SELECT id, $1 FROM users RETURNING (SELECT count(*) FROM orders)", i).Scan(&n); err != nil {
				t.Fatal(err)
			}
			var total string
			if err := q.QueryRow(ctx, "SELECT string_agg(total::text, ',') FROM orders").Scan(&total); err != nil {
				t.Fatal(err)
			}
			if n != 0 || total != fmt.Sprintf("%d.00", i) {
				t.Errorf("orders before this test's insert: %d, after: %q; want 0 and %d.00", n, total, i)
			}
		})
	}
}

package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgbranchproxy/pgbranchproxy/pgbranchtest"
)

// TestPgbranchtestWarm: Warm fills the source's pool and waits for it, the tests'
// branches are claimed from it, and restore sets the pool back to what it was, also
// when another binary warms the same source meanwhile.
func TestPgbranchtestWarm(t *testing.T) {
	t.Parallel()
	admin := freeAddr(t)
	const token = "warm-token-0123456789abcdef"
	s := startServer(t, newStateDir(t), "--admin-listen", admin, "--admin-token", token, "--reap-interval", "200ms")
	s.seedSQL("app", lifecycleSQL)
	opts := []pgbranchtest.Option{pgbranchtest.WithProxyURL("postgres://postgres@" + s.addr + "/app?sslmode=disable"),
		pgbranchtest.WithAdmin("http://"+admin, token), pgbranchtest.WithSource("app")}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if _, err := pgbranchtest.Warm(ctx, -1, opts...); err == nil {
		t.Error("Warm(-1) succeeded")
	}
	restore, err := pgbranchtest.Warm(ctx, 3, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(s.pooled()); got != 3 {
		t.Fatalf("Warm returned with %d pooled branches, want 3", got)
	}
	for i := range 2 {
		t.Run("test", func(t *testing.T) {
			c, err := pgx.Connect(ctx, pgbranchtest.URL(t, opts...))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			var v string
			if err := c.QueryRow(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v); err != nil {
				t.Fatalf("test %d: %v", i, err)
			}
		})
	}
	if claims, misses := s.poolEvents(t); claims != 2 || misses != 0 {
		t.Errorf("two tests after Warm: %d claims, %d misses; want 2, 0", claims, misses)
	}
	// A second test binary warms the same source at once: the first one's restore
	// leaves the second one's pool as it asked, and only the second's empties it.
	restore2, err := pgbranchtest.Warm(ctx, 2, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := restore(ctx); err != nil {
		t.Fatal(err)
	}
	waitPool(t, s, 2)
	if err := restore2(ctx); err != nil {
		t.Fatal(err)
	}
	waitPool(t, s, 0) // the server's default: no pool
	var sources []struct {
		Name    string `json:"name"`
		WarmSet int    `json:"warm_setting"`
	}
	if err := json.Unmarshal([]byte(s.mustCLI("source", "ls", "--json")), &sources); err != nil {
		t.Fatal(err)
	}
	if len(sources) != 1 || sources[0].WarmSet != -1 {
		t.Errorf("after restore: %+v, want the source back on the server's --warm (-1)", sources)
	}
}

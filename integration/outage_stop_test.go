package integration

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestStopDuringCatalogOutage: a server stopped while its Postgres catalog is
// down stops its branch servers and unmounts them all the same (the state
// directory's check finds nothing left), as a single server and as a node; once
// the catalog is back, the next start reconciles the rows that still say running
// and serves the branch with its data.
func TestStopDuringCatalogOutage(t *testing.T) {
	for _, role := range []string{"all", "node"} {
		t.Run(role, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cat, url := startCatalog(t, ctx)
			state := newStateDir(t)
			s := startServer(t, state, "--catalog", url, "--role", role)
			s.seedSQL("app", lifecycleSQL)
			mustWrite(t, s, "kept", "before")
			if err := cat.Pause(ctx); err != nil {
				t.Fatal(err)
			}
			s.stop()
			assertNothingLeft(t, filepath.Dir(state))
			if err := cat.Resume(ctx); err != nil {
				t.Fatal(err)
			}
			s2 := startServer(t, state, "--catalog", url, "--role", role)
			if out := mustPsql(t, s2, "app@kept", "SELECT v FROM t WHERE id = 1"); out != "before" {
				t.Fatalf("after the restart: %q", out)
			}
		})
	}
}

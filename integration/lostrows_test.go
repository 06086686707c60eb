package integration

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCatalogLostRows: what an asynchronous failover of its Postgres catalog
// does to a running serve, made by hand: the node row back at the epoch before
// (the standby had not received the registration) and a running branch's row
// gone (nor its creation). serve registers again above the epoch it held,
// without a restart and without stopping its other branch servers: a session
// held on one reads on, and a write to it passes the fence. The branch whose
// row is gone is stopped, unmounted and removed, and its name, asked for again,
// is made from the seed.
func TestCatalogLostRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, url := startCatalog(t, ctx)
	state := newStateDir(t)
	s := startServer(t, state, "--catalog", url, "--reap-interval", "250ms")
	s.seedSQL("app", lifecycleSQL)
	mustWrite(t, s, "kept", "v1")
	mustWrite(t, s, "orphan", "v1")
	held := s.connect(t, "app@kept")
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var id int64
	if err := db.QueryRowContext(ctx, "SELECT id FROM branches WHERE name = 'orphan'").Scan(&id); err != nil {
		t.Fatal(err)
	}
	orphan := s.branches()["orphan"]
	dir := filepath.Join(state, "branches", fmt.Sprint(id))
	if orphan.PID == 0 || !slices.Contains(postmastersUnder(state), orphan.PID) || mountsUnder(dir) == 0 {
		t.Fatalf("branch orphan before: %+v, postmasters %v, %d mounts under %s", orphan, postmastersUnder(state), mountsUnder(dir), dir)
	}

	for _, q := range []string{"UPDATE nodes SET epoch = epoch - 1", "DELETE FROM branches WHERE name = 'orphan'"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	eventually(t, 20*time.Second, "the node registered again", func() bool {
		ns := nodeList(t, s)
		return len(ns) == 1 && ns[0].Epoch == 2 && ns[0].Self && ns[0].State == "active"
	})
	eventually(t, 30*time.Second, "the branch whose row is gone removed", func() bool {
		_, err := os.Stat(dir)
		return !slices.Contains(postmastersUnder(state), orphan.PID) && mountsUnder(dir) == 0 && os.IsNotExist(err)
	})
	if _, ok := s.branches()["orphan"]; ok {
		t.Fatalf("branch ls still lists the branch whose row is gone:\n%s", s.mustCLI("branch", "ls"))
	}
	if _, err := held.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("the session held on another branch: %v\n%s", err, s.logs())
	}
	if info := s.mustCLI("info"); strings.Contains(info, `"node_lost": true`) {
		t.Fatalf("info says the node is lost:\n%s", info)
	}
	for _, want := range []string{"the catalog had lost this node's registration", "removing a branch whose catalog row is gone"} {
		if !strings.Contains(s.logs(), want) {
			t.Fatalf("the log does not say %q:\n%s", want, s.logs())
		}
	}
	held.Close(ctx)
	// A stop and a wake: fenced writes at the new epoch.
	s.mustCLI("branch", "stop", "kept")
	if out, err := s.psql(t, "app@kept", "SELECT v FROM t WHERE id = 1"); err != nil || out != "v1" {
		t.Fatalf("app@kept stopped and woken: %q %v, want v1\n%s", out, err, s.logs())
	}
	if out, err := s.psql(t, "app@orphan", "SELECT v FROM t WHERE id = 1"); err != nil || out != "seed" {
		t.Fatalf("the name whose row was lost, asked for again: %q %v, want the seed's row\n%s", out, err, s.logs())
	}
}

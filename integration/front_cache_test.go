package integration

import (
	"context"
	"testing"
	"time"
)

// TestFrontRouteCache: a front keeps the routes it read, and the catalog's
// notifications drop them when they change: a branch destroyed on one node and
// made again on the other is reached on the other at once. Through a catalog
// outage, one that refuses connections and one that stops answering, the front
// still reaches running branches by the routes it keeps, and refuses a new branch
// with 57P03 until the catalog is back.
func TestFrontRouteCache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cat, url := startCatalog(t, ctx)
	a := startServer(t, newStateDir(t), "--catalog", url, "--role", "node")
	b := startServer(t, newStateDir(t), "--catalog", url, "--role", "node")
	a.seedSQL("app", lifecycleSQL)
	relayURL, stall := stallRelay(t, url)
	fr := startFront(t, relayURL)

	// Find a name that lands on node a.
	name := ""
	for i := 0; name == ""; i++ {
		n := "moving" + string(rune('a'+i))
		mustPsql(t, fr, "app@"+n, "SELECT 1")
		if _, ok := a.branches()[n]; ok {
			name = n
		}
	}
	waitNoSessions(t, a, name)
	a.mustCLI("branch", "destroy", name)
	b.mustCLI("branch", "create", name, "--source", "app")
	if out, err := fr.psql(t, "app@"+name, "UPDATE t SET v = 'on b' WHERE id = 1 RETURNING v"); err != nil || out != "on b\nUPDATE 1" {
		t.Fatalf("the branch made again on node b, through the front that had it on node a: %q %v", out, err)
	}
	if _, ok := a.branches()[name]; ok {
		t.Fatal("node a made the branch again")
	}

	if err := cat.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := fr.psql(t, "app@"+name, "SELECT v FROM t WHERE id = 1"); err != nil || out != "on b" {
		t.Fatalf("a running branch through the front while the catalog is down: %q %v\n%s", out, err, fr.logs())
	}
	if err := tryConnect(fr.dsn("app@brandnew")); pgCode(err) != "57P03" {
		t.Fatalf("a new branch while the catalog is down: %v, want 57P03", err)
	}
	if err := cat.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a new branch once the catalog is back", func() bool {
		return tryConnect(fr.dsn("app@brandnew")) == nil
	})

	// The catalog stops answering the front (its connections stay open, nothing
	// comes back); the nodes still reach it.
	stall(true)
	if out, err := fr.psql(t, "app@"+name, "SELECT v FROM t WHERE id = 1"); err != nil || out != "on b" {
		t.Fatalf("a running branch through the front while the catalog does not answer: %q %v\n%s", out, err, fr.logs())
	}
	if err := tryConnect(fr.dsn("app@brandnew2")); pgCode(err) != "57P03" {
		t.Fatalf("a new branch while the catalog does not answer: %v, want 57P03", err)
	}
	stall(false)
	eventually(t, 30*time.Second, "a new branch once the catalog answers again", func() bool {
		return tryConnect(fr.dsn("app@brandnew2")) == nil
	})
}

func mustPsql(t *testing.T, s *server, db, sql string) string {
	t.Helper()
	out, err := s.psql(t, db, sql)
	if err != nil {
		t.Fatalf("psql %s %q: %v %s", db, sql, err, out)
	}
	return out
}

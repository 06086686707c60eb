package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestFrontLostNode: once the janitor has declared a killed node dead, a client
// asking for one of its branches with pgbranch.reset=on gets it made again on a
// live node from the seed, and a NOTICE saying so; one asking plainly gets 57P03
// naming the lost node.
func TestFrontLostNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, url := startCatalog(t, ctx)
	a := startServer(t, newStateDir(t), "--catalog", url, "--role", "node", "--node-dead-after", "1s")
	b := startServer(t, newStateDir(t), "--catalog", url, "--role", "node", "--node-dead-after", "1s")
	a.seedSQL("app", lifecycleSQL)
	fr := startFront(t, url)
	waitSeedCopy(t, b, "app")
	var onB []string
	for i := 0; len(onB) < 2; i++ {
		n := fmt.Sprintf("lost%d", i)
		mustPsql(t, fr, "app@"+n, "UPDATE t SET v = 'changed' WHERE id = 1")
		if _, ok := b.branches()[n]; ok {
			onB = append(onB, n)
		}
	}
	b.kill9()
	t.Cleanup(b.start) // before its stop: the restart reconciles what the kill left running
	eventually(t, 60*time.Second, "node b declared dead and its branches lost", func() bool {
		return pgCode(tryConnect(fr.dsn("app@"+onB[1]))) == "57P03" && len(nodeList(t, a)) == 2 && nodeState(t, a, b) == "dead"
	})

	var notices []string
	cfg, err := pgx.ParseConfig(fr.dsn("app@"+onB[0], "options='-c pgbranch.reset=on'"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Message) }
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("a lost branch asked for with a reset: %v", err)
	}
	var v string
	if err := c.QueryRow(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v); err != nil || v != "seed" {
		t.Fatalf("the branch made again: %q %v, want the seed's value", v, err)
	}
	c.Close(ctx)
	if len(notices) != 1 {
		t.Fatalf("notices %q, want one saying the branch was made again", notices)
	}
	if _, ok := a.branches()[onB[0]]; !ok {
		t.Fatalf("%s is not on the live node", onB[0])
	}
}

// nodeState returns the state of server s's node as another server sees it.
func nodeState(t *testing.T, from, s *server) string {
	t.Helper()
	id := mustStateID(t, s.state)
	for _, n := range nodeList(t, from) {
		if n.ID == id {
			return n.State
		}
	}
	return ""
}

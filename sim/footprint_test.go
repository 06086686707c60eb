//go:build simmeasure

package sim

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// footprintSessions is how many sessions M14 holds open through one front.
const footprintSessions = 100

// testFootprint is M14: the resident memory of fronts and nodes idle and with
// footprintSessions sessions open through one front on two running branches of
// one node (the single-host server beside them, the same way), and the catalog
// statements a new connection to a running branch and a creation cost.
func testFootprint(t *testing.T, ctx context.Context, c *cluster, x *extras) {
	footprintRSS(t, ctx, c, x)
	catalogStatements(t, ctx, c)
}

// footprintRSS logs the RSS of every front, node and the single-host server:
// idle, with the sessions open (through front-1 onto node-1, then onto the
// single-host server), and after they closed.
func footprintRSS(t *testing.T, ctx context.Context, c *cluster, x *extras) {
	members := append(append(append([]*member(nil), c.fronts...), c.nodes...), x.single)
	t.Logf("M14 RSS idle: %s", rssLine(t, members))
	node := c.nodes[0]
	names := []string{"m14-a", "m14-b"}
	for _, name := range names {
		x.createOn(t, ctx, c, node, name)
		if _, err := plain(x.single.name, x.single).firstQuery(ctx, "app@"+name); err != nil {
			t.Fatal(err)
		}
	}
	hold := func(e *endpoint, owner *member) {
		conns := make([]*pgx.Conn, 0, footprintSessions)
		defer func() {
			for _, conn := range conns {
				conn.Close(context.Background())
			}
		}()
		for i := range footprintSessions {
			conn, err := e.connect(ctx, "app@"+names[i%len(names)])
			if err != nil {
				t.Fatalf("session %d through %s: %v", i, e.name, err)
			}
			conns = append(conns, conn)
			var one int
			if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
				t.Fatalf("session %d through %s: %v", i, e.name, err)
			}
		}
		open := 0
		for _, b := range owner.branches(t) {
			open += b.Sessions
		}
		if open != footprintSessions {
			t.Errorf("%s counts %d sessions, want %d", owner.name, open, footprintSessions)
		}
		t.Logf("M14 RSS with %d sessions open through %s on %s's branches %v: %s", footprintSessions, e.name, owner.name, names, rssLine(t, members))
	}
	hold(plain(c.fronts[0].name, c.fronts[0]), node)
	hold(plain(x.single.name, x.single), x.single)
	time.Sleep(2 * time.Second)
	t.Logf("M14 RSS 2 s after the sessions closed: %s", rssLine(t, members))
}

// rssLine is "front-1 21.3 MiB, ..." for ms.
func rssLine(t *testing.T, ms []*member) string {
	t.Helper()
	var parts []string
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%s %.1f MiB", m.name, float64(rssKiB(t, m.cmd.Process.Pid))/1024))
	}
	return strings.Join(parts, ", ")
}

// rssKiB is a process's resident set (VmRSS) in KiB.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatalf("VmRSS of %d: %q", pid, line)
			}
			return n
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// statementsWindow is the least time a counted batch is spread over, and so
// the background window it is compared with: long enough to hold several
// heartbeats (2 s), janitor passes (6 s) and a reaper pass (10 s).
const statementsWindow = 12 * time.Second

// catalogStatements counts, with pg_stat_statements, the statements the fronts
// and nodes send the catalog for one new connection to a running branch and
// for one creation, each through the fronts in turn, less what an equally long
// window without clients counts (heartbeats, janitors, reaper passes).
func catalogStatements(t *testing.T, ctx context.Context, c *cluster) {
	st := c.cat.statementCounter(t, ctx)
	defer st.close()
	fronts := make([]*endpoint, len(c.fronts))
	for i, f := range c.fronts {
		fronts[i] = plain(f.name, f)
		if _, err := fronts[i].firstQuery(ctx, "app@m14-a"); err != nil { // each front learns the route
			t.Fatal(err)
		}
	}
	const connects = 100
	st.batch(t, "a new connection to a running branch (node-1's m14-a, through the fronts in turn, SELECT 1)", connects,
		func(i int) error {
			_, err := fronts[i%len(fronts)].firstQuery(ctx, "app@m14-a")
			return err
		})
	const creates = 10
	st.batch(t, "a creation (a new name's first session through the fronts in turn, SELECT 1)", creates,
		func(i int) error {
			_, err := fronts[i%len(fronts)].firstQuery(ctx, fmt.Sprintf("app@m14-new-%d", i))
			return err
		})
	for i := range creates {
		name := fmt.Sprintf("m14-new-%d", i)
		row, _ := c.cat.branch(t, name)
		if err := c.nodeByID(t, row.node).destroy(ctx, name); err != nil {
			t.Error(err)
		}
	}
}

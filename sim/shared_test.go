package sim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// M13 runs the nodes with a short idle stop and frequent reaper passes, and
// holds each count of open sessions for sharedHold: longer than the idle stop
// and two passes, so that a branch the nodes counted no session on would be
// stopped meanwhile.
const (
	sharedIdleStop = time.Second
	sharedReap     = 250 * time.Millisecond
	sharedHold     = 2 * time.Second
)

// testSharedBranch is M13: sessions on one branch through all the fronts. The
// nodes are started again with --idle-stop sharedIdleStop and --reap-interval
// sharedReap for it, and with their own flags after it.
func testSharedBranch(t *testing.T, ctx context.Context, c *cluster) {
	c.restartNodes(t, "--idle-stop", sharedIdleStop.String(), "--reap-interval", sharedReap.String())
	t.Cleanup(func() { c.restartNodes(t) })
	t.Logf("M13: the nodes started again with --idle-stop %s --reap-interval %s", sharedIdleStop, sharedReap)
	idleAcrossFronts(t, ctx, c, "m13-idle")
	ephemeralAcrossFronts(t, ctx, c, "m13-eph")
}

// idleAcrossFronts opens a session on branch name through each front and closes
// them one by one, sharedHold apart. The branch must run, on the same
// postmaster, while any is open (its node counting them), and be stopped by the
// idle stop once the last has closed: once, as the catalog's transitions show.
func idleAcrossFronts(t *testing.T, ctx context.Context, c *cluster, name string) {
	if err := c.write(ctx, c.fronts[0], name, name); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	row, _ := c.cat.branch(t, name)
	node := c.nodeByID(t, row.node)
	conns := make([]*pgx.Conn, len(c.fronts))
	defer func() {
		for _, conn := range conns {
			if conn != nil {
				conn.Close(context.Background())
			}
		}
	}()
	for i, f := range c.fronts {
		conn, err := c.connect(ctx, f, "app@"+name)
		if err != nil {
			t.Fatalf("%s through %s: %v", name, f.name, err)
		}
		conns[i] = conn
		var v string
		if err := conn.QueryRow(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v); err != nil || v != name {
			t.Fatalf("%s through %s: read %q %v", name, f.name, v, err)
		}
	}
	countsSessions(t, node, name, len(conns))
	pid := node.branches(t)[name].PID
	stops := func() int {
		return c.cat.count(t, "SELECT count(*) FROM transitions WHERE source = 'app' AND branch = $1 AND to_state = 'stopped'", name)
	}
	var closed time.Time
	for i, conn := range conns {
		open := len(conns) - i
		for end := time.Now().Add(sharedHold); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if b := node.branches(t)[name]; b.State != "running" || b.PID != pid {
				t.Fatalf("%s with %d sessions open through the fronts: %s, postmaster %d; want running, postmaster %d", name, open, b.State, b.PID, pid)
			}
		}
		if n := stops(); n != 0 {
			t.Fatalf("%s with %d sessions open: %d stops in the catalog's transitions", name, open, n)
		}
		conn.Close(ctx)
		conns[i], closed = nil, time.Now()
		if open > 1 {
			countsSessions(t, node, name, open-1)
		}
	}
	eventually(t, 15*time.Second, name+" stopped after its last session closed", func() bool {
		return node.branches(t)[name].State == "stopped"
	})
	stopped := time.Since(closed)
	time.Sleep(2 * sharedReap) // a second stop, were there one, would come by now
	row, _ = c.cat.branch(t, name)
	if n := stops(); n != 1 || row.state != "stopped" {
		t.Errorf("%s after its last session: %d stops in the catalog's transitions, row %s; want 1, stopped", name, n, row.state)
	}
	t.Logf("M13 %s on %s: held by sessions through %d fronts, closed one by one %s apart, ran on postmaster %d throughout; stopped %s after the last closed (idle stop %s), one stop in the catalog",
		name, node.name, len(c.fronts), sharedHold, pid, stopped.Round(time.Millisecond), sharedIdleStop)
}

// ephemeralAcrossFronts connects to a new ephemeral branch through every front at
// once; each session writes a row and reads the others', and they close one by
// one, eight reaper passes apart. The branch must be created once, live while any
// session is open, and be destroyed once after the last closes: one creation and
// one end in the catalog's transitions, one ephemeral destroy in its node's
// metrics, no row, no listing and no postmaster after.
func ephemeralAcrossFronts(t *testing.T, ctx context.Context, c *cluster, name string) {
	destroys := func() int {
		n := 0
		for _, node := range c.nodes {
			n += node.actions(t, "destroy", "ephemeral")
		}
		return n
	}
	before := destroys()
	conns := make([]*pgx.Conn, len(c.fronts))
	errs := make([]error, len(c.fronts))
	defer func() {
		for _, conn := range conns {
			if conn != nil {
				conn.Close(context.Background())
			}
		}
	}()
	var wg sync.WaitGroup
	for i, f := range c.fronts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conns[i], errs[i] = c.connectWith(ctx, f, "app@"+name, "-c pgbranch.ephemeral=on")
			if errs[i] == nil {
				_, errs[i] = conns[i].Exec(ctx, "UPDATE t SET v = $1 WHERE id = $2", f.name, i+1)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s through %s: %v", name, c.fronts[i].name, err)
		}
	}
	row, ok := c.cat.branch(t, name)
	if !ok {
		t.Fatalf("%s: no catalog row with %d sessions on it", name, len(conns))
	}
	node := c.nodeByID(t, row.node)
	if b := node.branches(t)[name]; !b.Ephemeral {
		t.Errorf("%s: %s lists it as not ephemeral", name, node.name)
	}
	ends := func() int {
		return c.cat.count(t, "SELECT count(*) FROM transitions WHERE source = 'app' AND branch = $1 AND to_state = 'gone'", name)
	}
	var closed time.Time
	for i, conn := range conns {
		for j := i; j < len(conns); j++ {
			if err := readsAll(ctx, conns[j], c.fronts); err != nil {
				t.Fatalf("%s through %s with %d sessions open: %v", name, c.fronts[j].name, len(conns)-i, err)
			}
		}
		conn.Close(ctx)
		conns[i], closed = nil, time.Now()
		if i == len(conns)-1 {
			break
		}
		time.Sleep(8 * sharedReap)
		_, ok := c.cat.branch(t, name)
		_, listed := node.branches(t)[name]
		if !ok || !listed || ends() != 0 {
			t.Fatalf("%s with %d of its %d sessions open: catalog row %v, listed by %s %v, %d ends in the transitions; want it there",
				name, len(conns)-i-1, len(conns), ok, node.name, listed, ends())
		}
	}
	eventually(t, 15*time.Second, name+" destroyed after its last session closed", func() bool {
		_, ok := c.cat.branch(t, name)
		_, listed := node.branches(t)[name]
		return !ok && !listed
	})
	gone := time.Since(closed)
	time.Sleep(2 * sharedReap) // a second destroy, were there one, would come by now
	creations := c.cat.count(t, "SELECT count(*) FROM transitions WHERE source = 'app' AND branch = $1 AND from_state = ''", name)
	in, err := instances(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, i := range in {
		if i.branch == row.id {
			running++
		}
	}
	if creations != 1 || ends() != 1 || destroys()-before != 1 || running != 0 {
		t.Errorf("%s after its last session: %d creations and %d ends in the catalog's transitions, %d ephemeral destroys in the nodes' metrics, %d postmasters; want 1, 1, 1, 0",
			name, creations, ends(), destroys()-before, running)
	}
	t.Logf("M13 %s on %s: ephemeral, created once by %d clients through %d fronts at once, each reading the others' rows; lived while any was open (closed %s apart); destroyed once, %s after the last closed",
		name, node.name, len(c.fronts), len(c.fronts), 8*sharedReap, gone.Round(time.Millisecond))
}

// countsSessions waits until node counts n sessions on branch.
func countsSessions(t *testing.T, node *member, branch string, n int) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("%s to count %d sessions on %s", node.name, n, branch), func() bool {
		return node.branches(t)[branch].Sessions == n
	})
}

// readsAll checks that conn sees the row each front's session wrote: row i+1's
// v is the name of front i.
func readsAll(ctx context.Context, conn *pgx.Conn, fronts []*member) error {
	for i, f := range fronts {
		var v string
		if err := conn.QueryRow(ctx, "SELECT v FROM t WHERE id = $1", i+1).Scan(&v); err != nil {
			return err
		}
		if v != f.name {
			return fmt.Errorf("row %d: %q, want %q", i+1, v, f.name)
		}
	}
	return nil
}

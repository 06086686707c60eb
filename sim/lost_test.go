package sim

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// Helpers of the scenarios in which the catalog's janitor declares a node dead
// (M7, M8, M11): the node's own branches, what the catalog holds of them when
// it is declared dead, and its exit and start after it learns so.

// branchOnNode creates the branch name on node n (through its admin socket, so
// that it is n's whatever the fronts would pick) and sets its row 1's v to name
// through the first front, which starts its server.
func branchOnNode(t *testing.T, ctx context.Context, c *cluster, n *member, name string) {
	t.Helper()
	n.cli(t, "branch", "create", name, "--source", "app")
	if err := c.write(ctx, c.fronts[0], name, name); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	if row, _ := c.cat.branch(t, name); row.node != n.name || row.state != "running" {
		t.Fatalf("%s: node %s, %s; want %s, running", name, row.node, row.state, n.name)
	}
}

// waitDead waits until the catalog records node id as dead and returns when
// it saw it.
func waitDead(t *testing.T, c *cluster, id string, within time.Duration) time.Time {
	t.Helper()
	eventually(t, within, id+" declared dead", func() bool {
		_, state := c.cat.node(t, id)
		return state == "dead"
	})
	return time.Now()
}

// waitLeaseOut waits until node id's lease has run out by the catalog's clock
// and returns when it saw it.
func waitLeaseOut(t *testing.T, c *cluster, id string, within time.Duration) time.Time {
	t.Helper()
	eventually(t, within, id+"'s lease to run out", func() bool {
		return c.cat.count(t, "SELECT count(*) FROM nodes WHERE id = $1 AND lease_until < (extract(epoch FROM now()) * 1e9)::bigint", id) == 1
	})
	return time.Now()
}

// catalogView is what the catalog holds of one node and its branches at one
// moment: its node row and its branch rows as text, and the last transition
// of any branch.
type catalogView struct {
	node     string
	rows     map[string]string // name: the row as JSON
	lastStep int64             // transitions.id
}

// viewOf reads the catalog's view of node id.
func viewOf(t *testing.T, c *cluster, id string) catalogView {
	t.Helper()
	v := catalogView{rows: map[string]string{}}
	if err := c.cat.db.QueryRow(`SELECT row_to_json(n)::text FROM nodes n WHERE id = $1`, id).Scan(&v.node); err != nil {
		t.Fatalf("catalog: node %s: %v", id, err)
	}
	rows, err := c.cat.db.Query(`SELECT name, row_to_json(b)::text FROM branches b WHERE node_id = $1`, id)
	if err != nil {
		t.Fatalf("catalog: branches of %s: %v", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, row string
		if err := rows.Scan(&name, &row); err != nil {
			t.Fatal(err)
		}
		v.rows[name] = row
	}
	if err := c.cat.db.QueryRow(`SELECT COALESCE(max(id), 0) FROM transitions`).Scan(&v.lastStep); err != nil {
		t.Fatal(err)
	}
	return v
}

// changedSince lists what differs between v, read when the node was declared
// dead, and the catalog now: its node row, any of its branch rows, and any
// transition of those branches logged since.
func (v catalogView) changedSince(t *testing.T, c *cluster, id string) []string {
	t.Helper()
	now := viewOf(t, c, id)
	var out []string
	if now.node != v.node {
		out = append(out, fmt.Sprintf("node row %s, was %s", now.node, v.node))
	}
	for name, row := range v.rows {
		if now.rows[name] != row {
			out = append(out, fmt.Sprintf("branch %s: %q, was %s", name, now.rows[name], row))
		}
	}
	for name := range now.rows {
		if _, ok := v.rows[name]; !ok {
			out = append(out, "branch "+name+" new: "+now.rows[name])
		}
	}
	names := make([]string, 0, len(v.rows))
	for name := range v.rows {
		names = append(names, name)
	}
	rows, err := c.cat.db.Query(`SELECT branch, from_state, to_state, reason FROM transitions
		WHERE source = 'app' AND id > $1 AND branch = ANY($2) ORDER BY id`, v.lastStep, names)
	if err != nil {
		t.Fatalf("catalog: transitions: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var b, from, to, reason string
		if err := rows.Scan(&b, &from, &to, &reason); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("transition of %s %s -> %s (%s)", b, from, to, reason))
	}
	return out
}

// allLost checks that every branch row of v is lost, as the janitor leaves the
// rows of a node it declared dead.
func (v catalogView) allLost(t *testing.T, c *cluster, id string) {
	t.Helper()
	if n := c.cat.count(t, "SELECT count(*) FROM branches WHERE node_id = $1 AND state <> 'lost'", id); n != 0 {
		t.Errorf("%d branches of %s are not lost after it was declared dead", n, id)
	}
}

// exitAfterLoss waits for node n, declared dead, to learn it (by its next
// heartbeat or fenced write), stop its branch servers and exit with 75, and
// checks that none of its postmasters and none of its mounts is left. It
// returns how long after since it exited.
func exitAfterLoss(t *testing.T, c *cluster, n *member, since time.Time) time.Duration {
	t.Helper()
	code, ok := n.waitExit(time.Minute)
	took := time.Since(since)
	if !ok {
		t.Fatalf("%s still runs a minute after it could reach the catalog again, declared dead:\n%s", n.name, n.tail())
	}
	if code != 75 {
		t.Errorf("%s, declared dead, exited with %d, want 75:\n%s", n.name, code, n.tail())
	}
	if left := postmastersOf(t, c, n); len(left) > 0 {
		t.Errorf("%s exited with %d postmasters left running: %v", n.name, len(left), left)
	}
	if mps := mountsUnder(n.state); len(mps) > 0 {
		t.Errorf("%s exited with %d mounts left: %v", n.name, len(mps), mps)
	}
	return took
}

// startAgain starts node n again, as its supervisor would after exit 75, and
// checks that it registered at an epoch above epoch, active. It returns how
// long it took to listen.
func startAgain(t *testing.T, c *cluster, n *member, epoch int64) time.Duration {
	t.Helper()
	start := time.Now()
	n.start(t)
	took := time.Since(start)
	if e, state := c.cat.node(t, n.name); e <= epoch || state != "active" {
		t.Errorf("%s started again: epoch %d %s, want above %d, active", n.name, e, state, epoch)
	}
	return took
}

// lostError checks that a plain client of the lost branch name gets 57P03 "the
// branch was on a lost node" through every front.
func lostError(t *testing.T, ctx context.Context, c *cluster, name, when string) {
	t.Helper()
	for _, f := range c.fronts {
		_, err := c.read(ctx, f, name)
		if sqlstate(err) != "57P03" || message(err) != "the branch was on a lost node" {
			t.Errorf("%s through %s %s: %v, want 57P03 the branch was on a lost node", name, f.name, when, err)
		}
	}
}

// recreated asks for the lost branch name with options (the ephemeral or the
// reset option) through the second front: the front must make it again from
// the seed on a node other than lost, and say so with a NOTICE. It returns how
// long the client waited for its first row.
func recreated(t *testing.T, ctx context.Context, c *cluster, name, options, lost string) time.Duration {
	t.Helper()
	start := time.Now()
	v, notices, err := c.readWith(ctx, c.fronts[1], name, options)
	took := time.Since(start)
	if err != nil || v != "seed" {
		t.Errorf("%s with %s after its node was lost: %q %v, want the seed's row", name, options, v, err)
		return took
	}
	want := "branch " + name + " was on a node that was lost; it was made again from its source's seed"
	if !slices.Contains(notices, want) {
		t.Errorf("%s with %s: notices %q, want %q", name, options, notices, want)
	}
	row, ok := c.cat.branch(t, name)
	if !ok && options != ephemeralOn {
		t.Errorf("%s with %s: no row after its session", name, options)
	}
	if ok && (row.node == lost || row.state == "lost") {
		t.Errorf("%s made again: node %s, %s; want another node than %s", name, row.node, row.state, lost)
	}
	return took
}

// The startup options of a client that wants its branch ephemeral, or reset.
const (
	ephemeralOn = "-c pgbranch.ephemeral=on"
	resetOn     = "-c pgbranch.reset=on"
)

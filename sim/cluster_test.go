package sim

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// cluster is one simulated deployment: a catalog host, nodes and fronts each on
// a host of its own, and a client host that every client dials from.
type cluster struct {
	dir    string
	net    *network
	cli    *host
	cat    *catalogServer
	nodes  []*member
	fronts []*member
	// seedsCopied is how long the nodes took to copy the source's seed from
	// the one that built it, once the fronts had started.
	seedsCopied time.Duration
}

// seedSQL is the source every branch of the simulation starts from.
const seedSQL = `CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT g, 'seed' FROM generate_series(1, 100) g;`

// startCluster starts the catalog, nNodes nodes and nFronts fronts, with the
// cluster's mutual TLS between fronts and nodes, adds the source app on the
// first node, and waits until every node holds its seed. The test's cleanups stop every process by its id (fronts, nodes,
// then the catalog), check that no mount and no postmaster is left under the
// run's directory, and remove the namespaces and the directory.
func startCluster(t *testing.T, ctx context.Context, nNodes, nFronts int) *cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", runPrefix())
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o711) // the postgres user reaches the branches' data under it
	t.Cleanup(func() {
		assertNothingLeft(t, dir)
		os.RemoveAll(dir)
	})
	names := []string{"cat", "cli"}
	for i := range nNodes {
		names = append(names, fmt.Sprintf("n%d", i+1))
	}
	for i := range nFronts {
		names = append(names, fmt.Sprintf("f%d", i+1))
	}
	// The catalog's standby host (M10), last so that the other hosts keep
	// their addresses.
	names = append(names, standbyHost)
	c := &cluster{dir: dir, net: newNetwork(t, names...)}
	c.cli = c.net.hosts["cli"]
	t.Logf("hosts on %s (switch %ssw): %s", c.net.subnet, c.net.prefix, c.hostList(names))
	ca := filepath.Join(dir, "cluster")
	mustRun(t, binPath, "cluster", "init", "--dir", ca)
	c.cat = startCatalog(t, ctx, filepath.Join(dir, "catalog"), c.net.hosts["cat"], c.net.subnet.String())
	// Nodes and fronts know both of the catalog's hosts and take the one that
	// accepts writes: after a failover (M10) they find the promoted standby
	// without a restart.
	c.cat.url = catalogURL(c.net.hosts["cat"], c.net.hosts[standbyHost])
	for i := range nNodes {
		h := c.net.hosts[fmt.Sprintf("n%d", i+1)]
		m := c.newMember(fmt.Sprintf("node-%d", i+1), h, "7432", true)
		mustRun(t, binPath, "cluster", "issue", "--dir", ca, "--role", "node", "--name", m.name, "--host", h.addr.String())
		m.args = []string{"--state-dir", m.state, "serve", "--role", "node", "--listen", m.addr, "--catalog", c.cat.url,
			"--shim", shimPath, "--cluster-dir", ca, "--cluster-name", m.name}
		c.nodes = append(c.nodes, m)
		m.start(t)
		t.Cleanup(func() { m.stop(t) })
	}
	src := filepath.Join(dir, "app.sql")
	if err := os.WriteFile(src, []byte(seedSQL), 0o644); err != nil {
		t.Fatal(err)
	}
	c.nodes[0].cli(t, "source", "add", "app", "--from-sql", src)
	for i := range nFronts {
		h := c.net.hosts[fmt.Sprintf("f%d", i+1)]
		m := c.newMember(fmt.Sprintf("front-%d", i+1), h, "6432", false)
		mustRun(t, binPath, "cluster", "issue", "--dir", ca, "--role", "front", "--name", m.name)
		// Trust on the simulated network (no other machine reaches it); a 10 s
		// start-up bound, so that no client waits more than 15 s through a front
		// (it waits 5 s longer than the node would), whatever goes wrong.
		m.args = []string{"--state-dir", m.state, "serve", "--role", "front", "--listen", m.addr, "--catalog", c.cat.url,
			"--auth", "trust", "--insecure-trust", "--startup-timeout", "10s", "--cluster-dir", ca, "--cluster-name", m.name}
		c.fronts = append(c.fronts, m)
		m.start(t)
		t.Cleanup(func() { m.stop(t) })
	}
	c.seedsCopied = c.waitSeeds(t)
	return c
}

// waitSeeds waits until every node holds the newest seed of source app, as
// fronts see it, so that they place new names on any node (they place them only
// where the seed is): its builder holds it, another node once it has copied it
// (its manifest.json is under <state-dir>/seeds/app/c<seed id>) and recorded
// the copy in the catalog. It returns how long it waited.
func (c *cluster) waitSeeds(t *testing.T) time.Duration {
	t.Helper()
	var (
		id    int64
		built string
	)
	if err := c.cat.db.QueryRow(`SELECT id, node_id FROM seeds WHERE source = 'app' ORDER BY generation DESC LIMIT 1`).
		Scan(&id, &built); err != nil {
		t.Fatalf("catalog: the seed of app: %v", err)
	}
	return eventually(t, time.Minute, "every node to hold app's seed", func() bool {
		for _, n := range c.nodes {
			if n.name == built {
				continue
			}
			if _, err := os.Stat(filepath.Join(n.state, "seeds", "app", fmt.Sprintf("c%d", id), "manifest.json")); err != nil {
				return false
			}
			if c.cat.count(t, "SELECT count(*) FROM node_seeds WHERE node_id = $1 AND seed_id = $2", n.name, id) != 1 {
				return false
			}
		}
		return true
	})
}

// restartNodes stops every node with SIGTERM (its branch servers stop with it)
// and starts it again on its state directory with extra added to its flags, for
// the rest of a scenario; restartNodes with none gives them back their own.
func (c *cluster) restartNodes(t *testing.T, extra ...string) {
	t.Helper()
	for _, n := range c.nodes {
		n.stop(t)
		n.extra = extra
		n.start(t)
	}
}

// deadAfter gives the nodes --node-dead-after d, restarting them (restartNodes)
// unless they run with it already.
func (c *cluster) deadAfter(t *testing.T, d time.Duration) {
	t.Helper()
	want := []string{"--node-dead-after", d.String()}
	for _, n := range c.nodes {
		if !slices.Equal(n.extra, want) {
			c.restartNodes(t, want...)
			t.Logf("the nodes started again with --node-dead-after %s", d)
			return
		}
	}
}

// newMember lays out a member's directory: its state directory and its log.
func (c *cluster) newMember(name string, h *host, port string, node bool) *member {
	home := filepath.Join(c.dir, h.name)
	os.Mkdir(home, 0o711)
	return &member{name: name, host: h, addr: net.JoinHostPort(h.addr.String(), port), node: node,
		state: filepath.Join(home, "state"), log: filepath.Join(home, "serve.log"), dialer: dialFrom(c.cli.ns)}
}

func (c *cluster) hostList(names []string) string {
	var s string
	for _, n := range names {
		s += fmt.Sprintf(" %s=%s", n, c.net.hosts[n].addr)
	}
	return s
}

// nodeByID finds the node whose cluster name (its node id) is id.
func (c *cluster) nodeByID(t *testing.T, id string) *member {
	t.Helper()
	for _, n := range c.nodes {
		if n.name == id {
			return n
		}
	}
	t.Fatalf("no node %q in the simulation", id)
	return nil
}

// restartStopped starts again any member a scenario left stopped, so that the
// next one starts from the whole cluster.
func (c *cluster) restartStopped(t *testing.T) {
	t.Helper()
	for _, m := range append(append([]*member(nil), c.nodes...), c.fronts...) {
		if !m.running() {
			m.start(t)
		}
	}
}

// logs is every member's log tail, for failure messages.
func (c *cluster) logs() string {
	var s string
	for _, m := range append(append([]*member(nil), c.nodes...), c.fronts...) {
		s += "\n==== " + m.name + "\n" + m.tail()
	}
	return s
}

func mustRun(t *testing.T, prog string, args ...string) {
	t.Helper()
	if out, err := exec.Command(prog, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", prog, args, err, out)
	}
}

// eventually polls cond every 50 ms until it holds, failing the test after within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

//go:build simmeasure

package sim

import (
	"context"
	"crypto/tls"
	"database/sql"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	pgcluster "github.com/pgbranchproxy/pgbranchproxy/cluster"
)

// TestMeasure is the measuring part of `make sim` (SIM_LONG=1): the design's
// M14 (footprint), M2 (steady state) and M1 (connect overhead), on a simulation
// of its own. Beside the usual cluster (a catalog, two nodes, three fronts,
// mutual TLS between fronts and nodes) it runs, on hosts of their own, a node
// and a front on plain TCP on a second database of the same catalog server (the
// plain pair), and a single-host server (serve's default role, its own SQLite
// catalog), each with the same source. Nothing is asserted of the numbers:
// every session, creation and pgbench run must succeed, and the numbers are
// logged for docs/scale-out.md.
//
// It is built only with the tag simmeasure (make sim, make sim-measure): it
// measures, and `go test ./sim` in make test runs the checks.
func TestMeasure(t *testing.T) {
	deadline := time.Now().Add(30 * time.Minute)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	t.Logf("machine: %s", machineLine())
	start := time.Now()
	c := startCluster(t, ctx, 2, 3)
	x := startExtras(t, ctx, c)
	t.Logf("cluster, plain pair and single-host server up in %s", time.Since(start).Round(time.Millisecond))
	scenario := func(name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			t.Logf("machine at the start: %s", machineLine())
			begin := time.Now()
			f(t)
			t.Logf("%s took %s; machine at the end: %s", name, time.Since(begin).Round(time.Millisecond), machineLine())
		})
	}
	scenario("M14Footprint", func(t *testing.T) { testFootprint(t, ctx, c, x) })
	scenario("M2SteadyState", func(t *testing.T) { testSteadyState(t, ctx, c, x) })
	scenario("M1ConnectOverhead", func(t *testing.T) { testConnectOverhead(t, ctx, c, x) })
	t.Logf("measurements took %s; machine at the end: %s", time.Since(start).Round(time.Millisecond), machineLine())
}

// extras are the deployments TestMeasure compares the cluster with.
type extras struct {
	single     *member // serve with its default role and its own SQLite catalog
	plainNode  *member // a node without cluster credentials (--insecure-trust)
	plainFront *member // a front without them, which dials the node in plain TCP
	// frontCert is the libpq parameters of front-1's cluster certificate, with
	// which a client reaches a node of the cluster directly.
	frontCert string
}

// startExtras starts the single-host server and the plain pair on hosts added
// to c's network, and adds source app to each (from the cluster's SQL).
func startExtras(t *testing.T, ctx context.Context, c *cluster) *extras {
	t.Helper()
	f := pgcluster.MemberFiles(filepath.Join(c.dir, "cluster"), pgcluster.RoleFront, c.fronts[0].name)
	x := &extras{frontCert: fmt.Sprintf("sslmode=verify-ca sslrootcert=%s sslcert=%s sslkey=%s", f.CA, f.Cert, f.Key)}
	src := filepath.Join(c.dir, "app.sql")
	start := func(m *member) {
		m.start(t)
		t.Cleanup(func() { m.stop(t) })
	}

	x.single = c.newMember("single", c.net.addHost(t, "sh"), "6432", true)
	x.single.args = []string{"--state-dir", x.single.state, "serve", "--listen", x.single.addr,
		"--auth", "trust", "--insecure-trust", "--shim", shimPath}
	start(x.single)
	x.single.cli(t, "source", "add", "app", "--from-sql", src)

	const plainDB = "pgbsim_plain"
	admin, err := sql.Open("pgx", c.cat.local)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+plainDB); err != nil {
		t.Fatal(err)
	}
	url := "postgres://postgres@" + net.JoinHostPort(c.cat.host.addr.String(), "5432") + "/" + plainDB + "?sslmode=disable"
	x.plainNode = c.newMember("plain-node", c.net.addHost(t, "np"), "7432", true)
	x.plainNode.args = []string{"--state-dir", x.plainNode.state, "serve", "--role", "node", "--listen", x.plainNode.addr,
		"--catalog", url, "--shim", shimPath, "--insecure-trust"}
	start(x.plainNode)
	x.plainNode.cli(t, "source", "add", "app", "--from-sql", src)
	x.plainFront = c.newMember("plain-front", c.net.addHost(t, "fp"), "6432", false)
	x.plainFront.args = []string{"--state-dir", x.plainFront.state, "serve", "--role", "front", "--listen", x.plainFront.addr,
		"--catalog", url, "--auth", "trust", "--insecure-trust", "--startup-timeout", "10s"}
	start(x.plainFront)
	return x
}

// endpoint is one way in from the client host: a front, a single-host server,
// or a node reached directly (with a front's certificate when it takes mutual
// TLS only).
type endpoint struct {
	name string
	m    *member
	// cert is the libpq parameters of the client certificate, "" for plain TCP.
	cert string
	// sessions resumes TLS sessions across connections.
	sessions tls.ClientSessionCache
}

// plain is an endpoint reached over plain TCP.
func plain(name string, m *member) *endpoint { return &endpoint{name: name, m: m} }

// direct is an endpoint reached with front-1's cluster certificate.
func (x *extras) direct(name string, m *member) *endpoint {
	return &endpoint{name: name, m: m, cert: x.frontCert, sessions: tls.NewLRUClientSessionCache(16)}
}

// dsn is the libpq connection string of database db (app@branch) there.
func (e *endpoint) dsn(db string) string {
	host, port, _ := net.SplitHostPort(e.m.addr)
	s := fmt.Sprintf("host=%s port=%s user=postgres dbname=%s", host, port, db)
	if e.cert == "" {
		return s + " sslmode=disable"
	}
	return s + " " + e.cert
}

// connect opens a session on db from the client host.
func (e *endpoint) connect(ctx context.Context, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(e.dsn(db))
	if err != nil {
		return nil, err
	}
	cfg.DialFunc = e.m.dialer
	if cfg.TLSConfig != nil {
		cfg.TLSConfig.ClientSessionCache = e.sessions
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// firstQuery connects to db, runs SELECT 1 and hangs up; it returns how long
// the connect and the query took.
func (e *endpoint) firstQuery(ctx context.Context, db string) (time.Duration, error) {
	start := time.Now()
	conn, err := e.connect(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("%s through %s: %w", db, e.name, err)
	}
	defer conn.Close(context.Background())
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return 0, fmt.Errorf("%s through %s: %w", db, e.name, err)
	}
	return time.Since(start), nil
}

// createOn makes branch name of app on node n (a cluster node, reached
// directly, so that the branch is n's) and checks where the catalog put it.
func (x *extras) createOn(t *testing.T, ctx context.Context, c *cluster, n *member, name string) {
	t.Helper()
	if _, err := x.direct(n.name, n).firstQuery(ctx, "app@"+name); err != nil {
		t.Fatalf("create %s on %s: %v", name, n.name, err)
	}
	if row, _ := c.cat.branch(t, name); row.node != n.name {
		t.Fatalf("%s: the catalog has it on %q, not %s", name, row.node, n.name)
	}
}

// rotation is the order of n items in round r: 0..n-1 shifted by r.
func rotation(n, r int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (i + r) % n
	}
	return out
}

package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog/catalogtest"
)

// roles measures a session through a front and a node on one Postgres catalog
// against the same session on the single-host proxy, paired in one run: a
// connect and first query to a running branch, a new branch's first query,
// select-only at 1 and 8 clients, and a new connection per transaction. The node
// is also reached directly, to show which of the two hops costs what. The front
// reaches the node over plain TCP on loopback (no cluster TLS).
func roles(ctx context.Context, e *env, px *proxyServer, d *dataset, rep *report) error {
	cat, err := catalogtest.Start(ctx)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	e.cl.push("catalog", cat.Stop)
	url, err := cat.NewDatabase(ctx)
	if err != nil {
		return err
	}
	node, err := e.startProxy(ctx, filepath.Join(e.root, "state-node"), true, "--role", "node", "--catalog", url)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	defer node.stop()
	if err := d.stop(); err != nil {
		return err
	}
	_, err = node.cli(ctx, "source", "add", d.name, "--from-datadir", d.dataDir)
	if serr := d.start(ctx, e); err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	front, err := e.startFront(ctx, url)
	if err != nil {
		return err
	}
	defer front.stop()
	if err := firstQueries(ctx, e, px, front, d, rep); err != nil {
		return err
	}
	paths := []path{{"proxy", px.dsn(d.name + "@bench")}, {"node", node.dsn(d.name + "@bench")}, {"front", front.dsn(d.name + "@bench")}}
	for _, pa := range paths {
		if _, err := firstQuery(ctx, pa.conn); err != nil {
			return fmt.Errorf("branch bench through %s: %w", pa.name, err)
		}
	}
	groups := []*tpsGroup{
		{metric: "roles_select_only_c1_tps", w: workload{Clients: 1, SelectOnly: true}, paths: paths},
		{metric: "roles_select_only_c8_tps", w: workload{Clients: 8, SelectOnly: true}, paths: paths},
		{metric: "roles_connect_per_txn_tps", w: workload{Clients: 1, SelectOnly: true, ConnectPerTxn: true}, paths: paths},
	}
	run := func(g *tpsGroup, pa path, seconds int) (float64, error) {
		w := g.w
		w.Conn, w.Seconds = pa.conn, seconds
		return runPgbench(ctx, e, w)
	}
	if err := measureGroups(ctx, e, groups, run); err != nil {
		return err
	}
	for _, g := range groups {
		for i, pa := range g.paths {
			rep.series(g.metric+"/"+pa.name, "tps", g.tps[i], fmt.Sprintf("pgbench -n -S -c %d%s, rotated rounds", g.w.Clients, map[bool]string{true: " -C"}[g.w.ConnectPerTxn]))
		}
		const note = "paired by round; the front and node share one Postgres catalog, plain TCP between them"
		rep.series(g.metric[:len(g.metric)-4]+"_ratio/front_vs_proxy", "ratio", pairedRatios(g.tps[2], g.tps[0]), note)
		rep.series(g.metric[:len(g.metric)-4]+"_ratio/node_vs_proxy", "ratio", pairedRatios(g.tps[1], g.tps[0]), note)
	}
	return nil
}

// firstQueries times, alternating the two, a connect and first query to a
// running branch and a new branch's first query through the front and through
// the single-host proxy.
func firstQueries(ctx context.Context, e *env, px, front *proxyServer, d *dataset, rep *report) error {
	n := 20
	if e.cfg.quick {
		n = 10
	}
	for _, pa := range []*proxyServer{px, front} {
		if _, err := firstQuery(ctx, pa.dsn(d.name+"@running")); err != nil {
			return err
		}
	}
	running := map[string][]float64{}
	created := map[string][]float64{}
	for i := range n {
		for _, pa := range []struct {
			name string
			p    *proxyServer
		}{{"proxy", px}, {"front", front}} {
			t, err := firstQuery(ctx, pa.p.dsn(d.name+"@running"))
			if err != nil {
				return fmt.Errorf("running branch through %s: %w", pa.name, err)
			}
			running[pa.name] = append(running[pa.name], ms(t))
			t, err = firstQuery(ctx, pa.p.dsn(fmt.Sprintf("%s@roles-%s-%d", d.name, pa.name, i)))
			if err != nil {
				return fmt.Errorf("new branch through %s: %w", pa.name, err)
			}
			created[pa.name] = append(created[pa.name], ms(t))
		}
	}
	for _, name := range []string{"proxy", "front"} {
		rep.latency("roles_running_first_query_ms", name, running[name], false, "pgx connect + SELECT 1 to a running branch, alternating proxy and front")
		rep.latency("roles_new_branch_first_query_ms", name, created[name], false, "pgx connect + SELECT 1 creating the branch (cold, no pool), alternating")
	}
	added := func(name string, xs map[string][]float64) {
		v := percentile(xs["front"], 50) - percentile(xs["proxy"], 50)
		rep.add(row{Name: name, Unit: "ms", N: n, Value: v, Min: v, Max: v, Note: "front + node p50 less single-host p50"})
	}
	added("roles_running_first_query_ms/p50_added_by_front", running)
	added("roles_new_branch_first_query_ms/p50_added_by_front", created)
	return nil
}

// startFront starts serve --role front on the catalog at url and waits for its
// port (a front has no admin socket).
func (e *env) startFront(ctx context.Context, url string) (*proxyServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &proxyServer{e: e, addr: "127.0.0.1:" + strconv.Itoa(port)}
	p.proc, err = startProc("pgbranchproxy-front", nil, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"},
		syscall.SIGTERM, e.logPath("pgbranchproxy-front"), e.proxyBin,
		"--state-dir", filepath.Join(e.root, "state-front"), "serve", "--role", "front", "--catalog", url,
		"--listen", p.addr, "--auth", "trust", "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	e.cl.push("pgbranchproxy-front", p.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", p.addr, time.Second); err == nil {
			c.Close()
			return p, nil
		}
		if p.proc.exited() || time.Now().After(deadline) {
			_ = p.stop()
			return nil, fmt.Errorf("front did not start:\n%s", p.proc.logTail(20))
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// rolesTargets records whether this run met the scale-out targets it measures.
func rolesTargets(rep *report) {
	rep.check("front + node ≥ 0.9× the single-host proxy, select-only c1 (paired)", "roles_select_only_c1_ratio/front_vs_proxy", func(v float64) bool { return v >= 0.9 })
	rep.check("connect → first query to a running branch through front + node ≤ single-host + 2 ms (p50)", "roles_running_first_query_ms/p50_added_by_front", func(v float64) bool { return v <= 2 })
	rep.check("a cold create through a front ≤ single-host + 5 ms (p50)", "roles_new_branch_first_query_ms/p50_added_by_front", func(v float64) bool { return v <= 5 })
}

package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// path is one way of reaching the data: a connection string and what it is.
type path struct {
	name string
	conn string
}

// tpsGroup is one pgbench workload run through several paths, round by round.
type tpsGroup struct {
	metric string
	w      workload
	paths  []path
	tps    [][]float64 // tps[path][round]
}

// throughput runs pgbench through every path to the small data set: the plain
// cluster over its unix socket and over TCP, PgBouncer (session mode) in front of
// that same cluster, the proxy (to the branch "bench" of the source made from a
// copy of that cluster), and that branch's server directly over its unix socket.
func throughput(ctx context.Context, e *env, px *proxyServer, d *dataset, rep *report) error {
	cfg := e.cfg
	kernel, err := startKernelProxy(ctx, e, d)
	if err != nil {
		return err
	}
	defer kernel.stop()
	proxyConn := px.dsn(d.name + "@bench")
	if _, err := firstQuery(ctx, proxyConn); err != nil {
		return fmt.Errorf("create branch bench: %w", err)
	}
	info, err := px.branch(ctx, "bench")
	if err != nil {
		return err
	}
	sock, port, err := branchSocket(info.PID)
	if err != nil {
		return err
	}
	branchConn := fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", sock, port, d.name)
	bouncer, err := e.startPgbouncer(ctx, d.plain)
	if err != nil {
		return err
	}
	defer bouncer.stop()
	e.logf("throughput: branch bench (pid %d, %s, socket %s), plain cluster on 127.0.0.1:%d and %s, pgbouncer on 127.0.0.1:%d",
		info.PID, info.CowMode, sock, d.plain.port, d.plain.sockDir, bouncer.port)

	p := map[string]path{
		"direct_unix": {"direct_unix", d.plain.unixDSN(d.name)},
		"branch_unix": {"branch_unix", branchConn},
		"direct_tcp":  {"direct_tcp", d.plain.tcpDSN(d.name)},
		"pgbouncer":   {"pgbouncer", bouncer.dsn(d.name)},
		"proxy":       {"proxy", proxyConn},
	}
	kp, err := kernelPath(ctx, kernel, d)
	if err != nil {
		return err
	}
	all := []path{p["direct_unix"], p["branch_unix"], p["direct_tcp"], p["pgbouncer"], p["proxy"]}
	groups := []*tpsGroup{
		{metric: "select_only_c1_tps", w: workload{Clients: 1, SelectOnly: true}, paths: append(all, kp)},
		{metric: "select_only_c8_tps", w: workload{Clients: 8, SelectOnly: true}, paths: append(all, kp)},
		{metric: "connect_per_txn_tps", w: workload{Clients: 1, SelectOnly: true, ConnectPerTxn: true},
			paths: []path{p["direct_tcp"], p["pgbouncer"], p["proxy"], kp}},
		{metric: "tpcb_c4_tps", w: workload{Clients: 4}, paths: []path{p["direct_unix"], p["branch_unix"], p["direct_tcp"], p["proxy"], kp}},
	}
	// CPU a proxy process spends per transaction, by workload and proxy.
	pids := map[string]int{"proxy": px.proc.cmd.Process.Pid, kp.name: kernel.proc.cmd.Process.Pid}
	whose := map[string]string{"proxy": "the proxy process",
		kp.name: "the --relay kernel proxy process (not its redirects, which run in kernel workers)"}
	cpuPerTxn := map[string][]float64{}
	run := func(g *tpsGroup, pa path, seconds int) (float64, error) {
		w := g.w
		w.Conn, w.Seconds = pa.conn, seconds
		pid, ok := pids[pa.name]
		if !ok {
			return runPgbench(ctx, e, w)
		}
		key := strings.TrimSuffix(g.metric, "_tps") + "_" + pa.name + "_cpu_us_per_txn"
		before, cerr := cpuSeconds(pid)
		tps, err := runPgbench(ctx, e, w)
		if after, cerr2 := cpuSeconds(pid); err == nil && cerr == nil && cerr2 == nil && tps > 0 {
			cpuPerTxn[key] = append(cpuPerTxn[key], (after-before)*1e6/(tps*float64(seconds)))
		}
		return tps, err
	}
	if err := measureGroups(ctx, e, groups, run); err != nil {
		return err
	}

	note := func(g *tpsGroup) string {
		n := fmt.Sprintf("pgbench -n -c %d -T %d", g.w.Clients, cfg.seconds)
		if g.w.SelectOnly {
			n += " -S"
		}
		if g.w.ConnectPerTxn {
			n += " -C"
		}
		return n
	}
	for _, g := range groups {
		for _, pa := range g.paths {
			key := strings.TrimSuffix(g.metric, "_tps") + "_" + pa.name + "_cpu_us_per_txn"
			if xs := cpuPerTxn[key]; len(xs) > cfg.rounds {
				// The first is the warm-up's.
				rep.series(key, "us", xs[1:], "CPU time (user+system) of "+whose[pa.name]+" per transaction, "+note(g))
			}
		}
	}
	series := map[string][]float64{}
	for _, g := range groups {
		for i, pa := range g.paths {
			name := g.metric + "/" + pa.name
			series[name] = g.tps[i]
			rep.series(name, "tps", g.tps[i], note(g))
		}
	}
	ratio := func(name, a, b, note string) {
		rep.series(name, "ratio", pairedRatios(series[a], series[b]), note)
	}
	ratio("select_only_c1_ratio/proxy_vs_pgbouncer", "select_only_c1_tps/proxy", "select_only_c1_tps/pgbouncer", "paired by round")
	ratio("select_only_c8_ratio/proxy_vs_pgbouncer", "select_only_c8_tps/proxy", "select_only_c8_tps/pgbouncer", "paired by round")
	ratio("select_only_c1_ratio/proxy_vs_direct_tcp", "select_only_c1_tps/proxy", "select_only_c1_tps/direct_tcp", "paired by round")
	ratio("select_only_c8_ratio/proxy_vs_direct_tcp", "select_only_c8_tps/proxy", "select_only_c8_tps/direct_tcp", "paired by round")
	ratio("connect_per_txn_ratio/proxy_vs_pgbouncer", "connect_per_txn_tps/proxy", "connect_per_txn_tps/pgbouncer", "paired by round")
	ratio("connect_per_txn_ratio/proxy_vs_direct_tcp", "connect_per_txn_tps/proxy", "connect_per_txn_tps/direct_tcp", "paired by round")
	ratio("branch_select_only_ratio/plain", "select_only_c1_tps/branch_unix", "select_only_c1_tps/direct_unix", "branch vs plain cluster, both unix socket, c1, paired")
	ratio("branch_select_only_ratio/plain_c8", "select_only_c8_tps/branch_unix", "select_only_c8_tps/direct_unix", "branch vs plain cluster, both unix socket, c8, paired")
	ratio("tpcb_c4_ratio/proxy_vs_direct_tcp", "tpcb_c4_tps/proxy", "tpcb_c4_tps/direct_tcp", "paired by round")
	ratio("branch_tpcb_ratio/plain", "tpcb_c4_tps/branch_unix", "tpcb_c4_tps/direct_unix", "branch vs plain cluster, both unix socket, c4, paired")
	kernelRatios(ratio)
	return nil
}

// measureGroups runs every group's paths once for cfg.warmup seconds, then
// cfg.rounds rounds of cfg.seconds, the paths rotated from round to round, and
// records each run's tps in its group.
func measureGroups(ctx context.Context, e *env, groups []*tpsGroup, run func(g *tpsGroup, pa path, seconds int) (float64, error)) error {
	cfg := e.cfg
	for _, g := range groups {
		g.tps = make([][]float64, len(g.paths))
	}
	start := time.Now()
	for _, g := range groups {
		for _, pa := range g.paths {
			if _, err := run(g, pa, cfg.warmup); err != nil {
				return fmt.Errorf("warm-up %s/%s: %w", g.metric, pa.name, err)
			}
		}
	}
	for r := range cfg.rounds {
		e.logf("throughput round %d/%d (%s so far)", r+1, cfg.rounds, time.Since(start).Round(time.Second))
		for _, g := range groups {
			for _, i := range rotation(len(g.paths), r) {
				tps, err := run(g, g.paths[i], cfg.seconds)
				if err != nil {
					return fmt.Errorf("%s/%s round %d: %w", g.metric, g.paths[i].name, r+1, err)
				}
				g.tps[i] = append(g.tps[i], tps)
			}
		}
	}
	return nil
}

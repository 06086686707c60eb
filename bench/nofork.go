package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// noFork measures what keeping forked processes ready buys: a new branch claimed
// from the warm pool against a connect to an existing branch whose server session
// is reused; 20 clients at once (fanouts); connect-per-transaction with
// server-session reuse on and off next to PgBouncer, and the steps of such a
// connect timed on both (connectPhaseTimes); and a 200-test suite run five
// ways on the same data. Two proxies of their own serve the small data set: one
// with a pool and reuse, one with neither.
func noFork(ctx context.Context, e *env, d *dataset, rep *report) error {
	cfg := e.cfg
	warm, err := e.startProxy(ctx, filepath.Join(e.root, "state-pool"), true, "--warm", "5", "--warm-user", "postgres", "--reap-interval", "200ms")
	if err != nil {
		return err
	}
	defer warm.stop()
	cold, err := e.startProxy(ctx, filepath.Join(e.root, "state-cold"), true, "--reuse", "off", "--reap-interval", "200ms")
	if err != nil {
		return err
	}
	defer cold.stop()
	if err := d.stop(); err != nil { // a data directory is copied stopped
		return err
	}
	for _, p := range []*proxyServer{warm, cold} {
		if _, err := p.cli(ctx, "source", "add", d.name, "--from-datadir", d.dataDir); err != nil {
			return err
		}
	}
	if err := warm.waitPooled(ctx, 5); err != nil {
		return err
	}

	// Pooled first query, paired by round with a reused connect to an existing branch.
	if _, err := firstQuery(ctx, warm.dsn(d.name+"@existing")); err != nil {
		return err
	}
	// The two take turns going first: the first connect after a pause pays for
	// waking the client's and the proxy's threads.
	var pooledMS, reusedMS []float64
	for r := range cfg.newBranchRounds {
		if err := warm.waitPooled(ctx, 5); err != nil {
			return err
		}
		for _, i := range rotation(2, r) {
			if i == 0 {
				dur, err := firstQuery(ctx, warm.dsn(fmt.Sprintf("%s@pooled-%d", d.name, r)))
				if err != nil {
					return fmt.Errorf("pooled first query: %w", err)
				}
				pooledMS = append(pooledMS, ms(dur))
				continue
			}
			dur, err := firstQuery(ctx, warm.dsn(d.name+"@existing"))
			if err != nil {
				return err
			}
			reusedMS = append(reusedMS, ms(dur))
		}
	}
	rep.latency("new_branch_first_query_ms", "pooled", pooledMS, false, "pgx connect + SELECT 1 to a never-seen name, claimed from --warm 5")
	rep.latency("existing_branch_connect_ms", "reused", reusedMS, false, "pgx connect + SELECT 1 to a running branch with a parked server session")
	rep.series("new_branch_first_query_ratio/pooled_vs_reused", "ratio", pairedRatios(pooledMS, reusedMS), "paired by round")

	if err := withPgbouncer(ctx, e, d, func(bouncer *pgbouncer) error {
		if err := fanouts(ctx, e, warm, bouncer, d, rep); err != nil {
			return err
		}
		if err := connectPerTxn(ctx, e, warm, cold, bouncer, d, rep); err != nil {
			return err
		}
		return connectPhaseTimes(ctx, e, []phaseTarget{{"proxy_reuse", warm.addr, d.name + "@pgbench-c"},
			{"pgbouncer", fmt.Sprintf("127.0.0.1:%d", bouncer.port), d.name}}, rep)
	}); err != nil {
		return err
	}
	return testSuites(ctx, e, warm, cold, d, rep)
}

// withPgbouncer runs fn with PgBouncer in front of the data set's own server.
func withPgbouncer(ctx context.Context, e *env, d *dataset, fn func(*pgbouncer) error) error {
	if err := d.start(ctx, e); err != nil {
		return err
	}
	defer d.stop()
	bouncer, err := e.startPgbouncer(ctx, d.plain)
	if err != nil {
		return err
	}
	defer bouncer.stop()
	return fn(bouncer)
}

// fanouts has 20 clients connect at once, by round: each to a new name claimed
// from a pool of 20; then to the same 20 names again, now running with a parked
// server session each (what 20 connects at once cost without a claim); then
// through PgBouncer to one database whose server connections are open already (no
// claim, no server start, no fork: what 20 connects at once cost this machine).
func fanouts(ctx context.Context, e *env, warm *proxyServer, bouncer *pgbouncer, d *dataset, rep *report) error {
	cfg := e.cfg
	viaBouncer := func(int) string { return bouncer.dsn(d.name) }
	// Forty at once open PgBouncer's forty server connections (default_pool_size):
	// a round's twenty then find one idle even while the last round's are reset.
	if err := holdAtOnce(ctx, 40, viaBouncer); err != nil {
		return fmt.Errorf("pgbouncer warm-up: %w", err)
	}
	var single []float64
	for range cfg.newBranchRounds {
		dur, err := firstQuery(ctx, viaBouncer(0))
		if err != nil {
			return fmt.Errorf("pgbouncer first query: %w", err)
		}
		single = append(single, ms(dur))
	}
	if _, err := warm.cli(ctx, "source", "set", d.name, "--warm", "20"); err != nil {
		return err
	}
	var fan, again, bounced []float64
	// PgBouncer's 20 and the pool's take turns going first, each once the pool is
	// full (no server starting beside them).
	for r := range cfg.fanoutRounds {
		named := func(i int) string { return warm.dsn(fmt.Sprintf("%s@fan-%d-%d", d.name, r, i)) }
		for _, i := range rotation(2, r) {
			if err := warm.waitPooled(ctx, 20); err != nil {
				return err
			}
			runs := []fanRun{{named, &fan}, {named, &again}}
			if i == 1 {
				runs = []fanRun{{viaBouncer, &bounced}}
			}
			for _, run := range runs {
				durs, err := concurrentFirstQueries(ctx, 20, run.dsn)
				if err != nil {
					return err
				}
				*run.out = append(*run.out, durs...)
			}
		}
	}
	rep.latency("fanout20_first_query_ms", "pooled", fan, true, "20 new names at once, each claimed from --warm 20")
	rep.latency("fanout20_first_query_ms", "reused", again, true, "the same 20 names at once again, each running with a parked server session")
	rep.latency("existing_db_connect_ms", "pgbouncer", single, false, "pgx connect + SELECT 1 through PgBouncer (session mode), its server connections open already")
	rep.latency("fanout20_first_query_ms", "pgbouncer", bounced, true, "20 connects at once through PgBouncer to one database, its server connections open already")
	rep.quotient("fanout20_ratio/pooled_p95_vs_single_p50", "fanout20_first_query_ms/p95/pooled", "new_branch_first_query_ms/p50/pooled", "20 at once against one alone")
	rep.quotient("fanout20_ratio/pooled_vs_reused_p95", "fanout20_first_query_ms/p95/pooled", "fanout20_first_query_ms/p95/reused", "claims against connects to the same branches, 20 at once")
	rep.quotient("fanout20_ratio/pgbouncer_p95_vs_single_p50", "fanout20_first_query_ms/p95/pgbouncer", "existing_db_connect_ms/p50/pgbouncer", "the same rule applied to PgBouncer: 20 at once against one alone")
	rep.quotient("fanout20_ratio/pooled_vs_pgbouncer_p95", "fanout20_first_query_ms/p95/pooled", "fanout20_first_query_ms/p95/pgbouncer", "20 new branches at once against 20 connects at once through PgBouncer, same rounds")
	_, err := warm.cli(ctx, "source", "set", d.name, "--warm", "5")
	return err
}

// fanRun is one fan-out: its clients' DSNs and where their durations go.
type fanRun struct {
	dsn func(int) string
	out *[]float64
}

// holdAtOnce opens n connections at once, holds them until all are open, and
// closes them.
func holdAtOnce(ctx context.Context, n int, dsn func(int) string) error {
	conns := make([]*pgx.Conn, n)
	errs := atOnce(n, func(i int) (err error) {
		conns[i], err = pgx.Connect(ctx, dsn(i))
		return err
	})
	for _, c := range conns {
		if c != nil {
			c.Close(ctx)
		}
	}
	return errors.Join(errs...)
}

// atOnce runs fn(0) to fn(n-1) each in a goroutine of its own and returns their
// errors once all have returned.
func atOnce(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	return errs
}

// waitPooled waits until the proxy has n pooled branches ready.
func (p *proxyServer) waitPooled(ctx context.Context, n int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		list, err := p.branches(ctx, true)
		if err != nil {
			return err
		}
		ready := 0
		for _, b := range list {
			if b.State == "pooled" {
				ready++
			}
		}
		if ready >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d pooled branches ready after 5m", ready, n)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// concurrentFirstQueries runs n first queries at once and returns their durations.
func concurrentFirstQueries(ctx context.Context, n int, dsn func(int) string) ([]float64, error) {
	out := make([]float64, n)
	errs := atOnce(n, func(i int) error {
		dur, err := firstQuery(ctx, dsn(i))
		out[i] = ms(dur)
		return err
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// connectPerTxn runs pgbench -C -S against PgBouncer and both proxies, rotated by
// round, over TCP, and against PgBouncer and the proxy with reuse over their unix
// sockets.
func connectPerTxn(ctx context.Context, e *env, warm, cold *proxyServer, bouncer *pgbouncer, d *dataset, rep *report) error {
	cfg := e.cfg
	for _, p := range []*proxyServer{warm, cold} {
		if _, err := firstQuery(ctx, p.dsn(d.name+"@pgbench-c")); err != nil {
			return err
		}
	}
	paths := []path{{"proxy_reuse", warm.dsn(d.name + "@pgbench-c")}, {"proxy_no_reuse", cold.dsn(d.name + "@pgbench-c")},
		{"pgbouncer", bouncer.dsn(d.name)}, {"direct_tcp", d.plain.tcpDSN(d.name)},
		{"proxy_reuse_unix", warm.unixDSN(d.name + "@pgbench-c")}, {"pgbouncer_unix", bouncer.unixDSN(d.name)}}
	tps := make([][]float64, len(paths))
	for r := range cfg.rounds + 1 {
		for _, i := range rotation(len(paths), r) {
			secs := cfg.seconds
			if r == 0 {
				secs = cfg.warmup
			}
			v, err := runPgbench(ctx, e, workload{Conn: paths[i].conn, Clients: 1, SelectOnly: true, ConnectPerTxn: true, Seconds: secs})
			if err != nil {
				return fmt.Errorf("pgbench -C %s: %w", paths[i].name, err)
			}
			if r > 0 {
				tps[i] = append(tps[i], v)
			}
		}
	}
	note := fmt.Sprintf("pgbench -n -c 1 -T %d -S -C", cfg.seconds)
	for i, p := range paths {
		rep.series("connect_per_txn_tps/"+p.name, "tps", tps[i], note)
	}
	rep.series("connect_per_txn_ratio/proxy_reuse_vs_pgbouncer", "ratio", pairedRatios(tps[0], tps[2]), "paired by round")
	rep.series("connect_per_txn_ratio/proxy_no_reuse_vs_pgbouncer", "ratio", pairedRatios(tps[1], tps[2]), "paired by round")
	rep.series("connect_per_txn_ratio/proxy_reuse_vs_pgbouncer_unix", "ratio", pairedRatios(tps[4], tps[5]), "both over their unix sockets, paired by round")
	return nil
}

// testSuites runs the same 200 tests (connect, 3 small writes, SELECT, close, each on
// a database of its own) with 4 workers five ways, and reports each wall time:
// ephemeral branches from a pool of 5 and from a pool of 200 filled beforehand (as
// IntegreSQL fills its pool while tests compile), ephemeral branches without a
// pool, template clones, and one shared database.
func testSuites(ctx context.Context, e *env, warm, cold *proxyServer, d *dataset, rep *report) error {
	body := func(c *pgx.Conn, i int) error { return suiteTest(ctx, c, i) }
	onBranch := func(p *proxyServer, prefix string) func(i int) error {
		return func(i int) error {
			c, err := pgx.Connect(ctx, p.dsn(fmt.Sprintf("%s@%s-%d", d.name, prefix, i))+" options='-c pgbranch.ephemeral=on'")
			if err != nil {
				return err
			}
			defer c.Close(context.Background())
			return body(c, i)
		}
	}
	// The pooled proxy ran the earlier phases' branches (about thirty, idle): both
	// proxies start the suites with none but their pool, so that the suites
	// compare ways to run a test and not what else each proxy holds.
	for _, p := range []*proxyServer{warm, cold} {
		if err := p.destroyBranches(ctx); err != nil {
			return err
		}
	}
	if err := d.start(ctx, e); err != nil {
		return err
	}
	defer d.stop()
	admin, err := pgx.Connect(ctx, d.plain.unixDSN("postgres"))
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	var adminMu sync.Mutex // one admin connection; clones of one template go one at a time anyway
	adminExec := func(sql string) error {
		adminMu.Lock()
		defer adminMu.Unlock()
		_, err := admin.Exec(ctx, sql)
		return err
	}
	template := func(i int) error {
		db := fmt.Sprintf("suite_%d", i)
		if err := adminExec(fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", db, d.name)); err != nil {
			return err
		}
		c, err := pgx.Connect(ctx, d.plain.tcpDSN(db))
		if err != nil {
			return err
		}
		err = body(c, i)
		c.Close(context.Background())
		if derr := adminExec("DROP DATABASE " + db); err == nil {
			err = derr
		}
		return err
	}
	var truncMu sync.Mutex
	shared := func(i int) error {
		c, err := pgx.Connect(ctx, d.plain.tcpDSN(d.name))
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		// Tests share one database, so each cleans it before it runs, one at a time.
		truncMu.Lock()
		_, err = c.Exec(ctx, "TRUNCATE pgbench_history")
		truncMu.Unlock()
		if err != nil {
			return err
		}
		return body(c, i)
	}
	for _, s := range []struct {
		name string
		test func(int) error
	}{
		{"pooled_branches", onBranch(warm, "suite")},
		{"cold_branches", onBranch(cold, "suite")},
		{"template_clone", template},
		{"shared_truncate", shared},
		// Last: 200 servers started ahead, as a suite's set-up would, and their
		// ephemeral destroys, must not run beside another suite.
		{"pooled_deep_branches", onBranch(warm, "deep")},
	} {
		switch s.name {
		case "pooled_branches":
			if err := warm.waitPooled(ctx, 5); err != nil {
				return err
			}
		case "pooled_deep_branches":
			start := time.Now()
			if _, err := warm.cli(ctx, "source", "set", d.name, "--warm", "200"); err != nil {
				return err
			}
			if err := warm.waitPooled(ctx, 200); err != nil {
				return err
			}
			rep.add(row{Name: "pool_fill_200_s", Unit: "s", Value: time.Since(start).Seconds(), N: 1, Note: "source set --warm 200 until 200 are pooled"})
		}
		dur, err := runSuite(suiteTests, suiteWorkers, s.test)
		if err != nil {
			return fmt.Errorf("test suite %s: %w", s.name, err)
		}
		rep.add(row{Name: "test_suite_200_s/" + s.name, Unit: "s", Value: dur.Seconds(), N: 1,
			Note: "200 tests × (connect, 3 INSERTs, SELECT, close), 4 workers"})
		e.logf("test suite %s: %s", s.name, dur.Round(time.Millisecond))
	}
	for _, name := range []string{"pooled_branches", "pooled_deep_branches", "template_clone"} {
		rep.quotient("test_suite_ratio/"+name+"_vs_shared", "test_suite_200_s/"+name, "test_suite_200_s/shared_truncate", "wall time, same run")
	}
	rep.quotient("test_suite_ratio/pooled_branches_vs_template", "test_suite_200_s/pooled_branches", "test_suite_200_s/template_clone", "wall time, same run")
	return nil
}

// The per-test suite: suiteTests tests, suiteWorkers at a time.
const suiteTests, suiteWorkers = 200, 4

// suiteTest is one test of the suite: 3 small writes and a SELECT on c.
func suiteTest(ctx context.Context, c *pgx.Conn, i int) error {
	for j := range 3 {
		if _, err := c.Exec(ctx, "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, 1, $2, 1, now())", i, j); err != nil {
			return err
		}
	}
	var n int64
	return c.QueryRow(ctx, "SELECT count(*) FROM pgbench_history WHERE tid = $1", i).Scan(&n)
}

// runSuite runs test(0) to test(tests-1) on workers goroutines and returns the
// wall time and the first error; after an error, a worker takes no more tests.
func runSuite(tests, workers int, test func(i int) error) (time.Duration, error) {
	start := time.Now()
	next := make(chan int)
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for i := range next {
				if err := test(i); err != nil {
					errs <- err
					for range next {
					}
					return
				}
			}
			errs <- nil
		}()
	}
	for i := range tests {
		next <- i
	}
	close(next)
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return time.Since(start), first
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// newBranches times a client's first query on a never-seen branch of the small
// and the large source, next to the per-test alternatives on the same data:
// CREATE DATABASE … TEMPLATE on the plain cluster, and copying a stopped data
// directory (the seed) and starting Postgres on it. Every branch is destroyed
// right after, and that destroy is timed too.
func newBranches(ctx context.Context, e *env, px *proxyServer, small, large *dataset, rep *report) error {
	cfg := e.cfg
	type trial struct {
		key string
		run func(r int) (time.Duration, error)
	}
	var destroyMS, createMS []float64
	branch := func(d *dataset) func(int) (time.Duration, error) {
		return func(r int) (time.Duration, error) {
			name := fmt.Sprintf("nb-%s-%d", d.name, r)
			dur, err := firstQuery(ctx, px.dsn(d.name+"@"+name))
			if err != nil {
				return 0, fmt.Errorf("first query on new branch %s: %w", name, err)
			}
			info, err := px.waitIdle(ctx, name)
			if err != nil {
				return 0, err
			}
			createMS = append(createMS, float64(info.CreateMS))
			t0 := time.Now()
			if _, err := px.cli(ctx, "branch", "destroy", name); err != nil {
				return 0, err
			}
			destroyMS = append(destroyMS, ms(time.Since(t0)))
			return dur, nil
		}
	}
	admin := map[string]*pgx.Conn{}
	defer func() {
		for _, c := range admin {
			c.Close(context.Background())
		}
	}()
	for _, d := range []*dataset{small, large} {
		c, err := pgx.Connect(ctx, d.plain.unixDSN("postgres"))
		if err != nil {
			return err
		}
		admin[d.name] = c
	}
	template := func(d *dataset) func(int) (time.Duration, error) {
		return func(r int) (time.Duration, error) {
			return templateClone(ctx, admin[d.name], d, r)
		}
	}
	copyStart := func(d *dataset) func(int) (time.Duration, error) {
		return func(r int) (time.Duration, error) {
			return datadirCopyStart(ctx, e, d, r)
		}
	}
	branchTrials := []trial{{"branch/small", branch(small)}, {"branch/large", branch(large)}}
	altTrials := []trial{
		{"template/small", template(small)}, {"template/large", template(large)},
		{"datadir/small", copyStart(small)}, {"datadir/large", copyStart(large)},
	}
	samples := map[string][]float64{}
	start := time.Now()
	for r := range cfg.newBranchRounds {
		trials := branchTrials
		if r < cfg.altRounds {
			trials = append(append([]trial{}, branchTrials...), altTrials...)
		}
		for _, i := range rotation(len(trials), r) {
			dur, err := trials[i].run(r)
			if err != nil {
				return fmt.Errorf("%s round %d: %w", trials[i].key, r+1, err)
			}
			samples[trials[i].key] = append(samples[trials[i].key], ms(dur))
		}
		e.logf("new branches: round %d/%d (%s so far)", r+1, cfg.newBranchRounds, time.Since(start).Round(time.Second))
	}
	rep.latency("new_branch_first_query_ms", "small", samples["branch/small"], false,
		fmt.Sprintf("pgx connect + SELECT 1 through the proxy, %.0f MiB seed", small.sizeMiB))
	rep.latency("new_branch_first_query_ms", "large", samples["branch/large"], false,
		fmt.Sprintf("the same, %.0f MiB seed", large.sizeMiB))
	rep.series("new_branch_first_query_ratio/large_vs_small", "ratio",
		pairedRatios(samples["branch/large"], samples["branch/small"]), "paired by round")
	rep.latency("branch_create_ms", "", createMS, false, "create_ms as branch ls --json reports it (server side)")
	rep.latency("destroy_ms", "", destroyMS, false, "wall time of `pgbranchproxy branch destroy` (CLI process included)")
	rep.series("template_clone_ms/p50", "ms", samples["template/small"],
		fmt.Sprintf("CREATE DATABASE … TEMPLATE + connect + SELECT 1 on the plain cluster, %.0f MiB", small.sizeMiB))
	rep.series("template_clone_ms/p50/large", "ms", samples["template/large"], fmt.Sprintf("the same, %.0f MiB", large.sizeMiB))
	rep.series("datadir_copy_start_ms/p50", "ms", samples["datadir/small"],
		fmt.Sprintf("cp -a of the stopped seed + postgres start + connect + SELECT 1, %.0f MiB", small.sizeMiB))
	rep.series("datadir_copy_start_ms/p50/large", "ms", samples["datadir/large"], fmt.Sprintf("the same, %.0f MiB", large.sizeMiB))
	return nil
}

// templateClone times CREATE DATABASE … TEMPLATE d.name, a new TCP connection to
// the clone and its first SELECT 1, then drops the clone (not timed).
func templateClone(ctx context.Context, admin *pgx.Conn, d *dataset, r int) (time.Duration, error) {
	name := fmt.Sprintf("tpl_%d", r)
	for attempt := 0; ; attempt++ {
		t0 := time.Now()
		_, err := admin.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+d.name)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55006" && attempt < 5 {
			// The template is in use (autovacuum); such a sample is not the clone's cost.
			if err := sleep(ctx, time.Second); err != nil {
				return 0, err
			}
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("CREATE DATABASE %s TEMPLATE %s: %w", name, d.name, err)
		}
		if _, err := firstQuery(ctx, d.plain.tcpDSN(name)); err != nil {
			return 0, err
		}
		dur := time.Since(t0)
		if _, err := admin.Exec(ctx, "DROP DATABASE "+name); err != nil {
			return 0, err
		}
		return dur, nil
	}
}

// datadirCopyStart times `cp -a` of the stopped, settled seed directory, starting
// Postgres on the copy (the settings a branch server gets, TCP on a loopback port)
// and the first successful connect + SELECT 1 (polled every 2 ms). The copy is then
// stopped and removed (not timed).
func datadirCopyStart(ctx context.Context, e *env, d *dataset, r int) (time.Duration, error) {
	base := filepath.Join(e.root, "copies")
	if err := os.MkdirAll(base, 0o711); err != nil {
		return 0, err
	}
	dst := filepath.Join(base, fmt.Sprintf("%s-%d", d.name, r))
	sock := dst + "-sock"
	defer os.RemoveAll(sock)
	defer os.RemoveAll(dst)
	t0 := time.Now()
	if out, err := exec.CommandContext(ctx, "cp", "-a", d.seedDir, dst).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("cp -a %s: %v: %s", d.seedDir, err, out)
	}
	srv, err := e.startPG(ctx, fmt.Sprintf("copy-%s-%d", d.name, r), dst, sock, true, d.name)
	if err != nil {
		return 0, err
	}
	dur := time.Since(t0)
	return dur, srv.stop()
}

// wakeAndReset times, on one branch of the small source, `branch stop` followed by
// a client's connect + first query (the wake), and `branch reset` of a branch that
// has just written a row.
func wakeAndReset(ctx context.Context, e *env, px *proxyServer, d *dataset, rep *report) error {
	cfg := e.cfg
	dsn := px.dsn(d.name + "@wake")
	if _, err := firstQuery(ctx, dsn); err != nil {
		return err
	}
	var wakeMS, stopMS, resetMS []float64
	for range cfg.wakeRounds {
		if _, err := px.waitIdle(ctx, "wake"); err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := px.cli(ctx, "branch", "stop", "wake"); err != nil {
			return err
		}
		stopMS = append(stopMS, ms(time.Since(t0)))
		dur, err := firstQuery(ctx, dsn)
		if err != nil {
			return fmt.Errorf("wake: %w", err)
		}
		wakeMS = append(wakeMS, ms(dur))
	}
	resetDSN := px.dsn(d.name + "@reset")
	for range cfg.resetRounds {
		if err := execSQL(ctx, resetDSN, "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 1"); err != nil {
			return err
		}
		if _, err := px.waitIdle(ctx, "reset"); err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := px.cli(ctx, "branch", "reset", "reset"); err != nil {
			return err
		}
		resetMS = append(resetMS, ms(time.Since(t0)))
	}
	for _, name := range []string{"wake", "reset"} {
		if _, err := px.waitIdle(ctx, name); err != nil {
			return err
		}
		if _, err := px.cli(ctx, "branch", "destroy", name); err != nil {
			return err
		}
	}
	rep.latency("wake_first_query_ms", "", wakeMS, false, "after `branch stop`: pgx connect + SELECT 1 through the proxy")
	rep.series("stop_ms/p50", "ms", stopMS, "wall time of `pgbranchproxy branch stop`")
	rep.series("reset_ms/p50", "ms", resetMS, "wall time of `pgbranchproxy branch reset` of a running branch after an UPDATE (stop, clear, start)")
	return nil
}

// fanout has 20 clients each create a different new branch at the same moment.
func fanout(ctx context.Context, e *env, px *proxyServer, d *dataset, rep *report) error {
	const clients = 20
	var all []float64
	for r := range e.cfg.fanoutRounds {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		gate := make(chan struct{})
		names := make([]string, clients)
		for i := range clients {
			names[i] = fmt.Sprintf("fan-%d-%d", r, i)
			wg.Go(func() {
				<-gate
				dur, err := firstQuery(ctx, px.dsn(d.name+"@"+names[i]))
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("fan-out client %d: %w", i, err)
				}
				if err == nil {
					all = append(all, ms(dur))
				}
			})
		}
		close(gate)
		wg.Wait()
		if firstErr != nil {
			return firstErr
		}
		for _, name := range names {
			if _, err := px.waitIdle(ctx, name); err != nil {
				return err
			}
			if _, err := px.cli(ctx, "branch", "destroy", name); err != nil {
				return err
			}
		}
		e.logf("fan-out: round %d/%d", r+1, e.cfg.fanoutRounds)
	}
	rep.latency("fanout20_first_query_ms", "", all, true, "20 clients, each a different new branch, at once")
	return nil
}

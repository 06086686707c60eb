package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run sets everything up, runs every phase, prints the report (also the part
// measured before an error) and stops and removes everything it started.
func run(ctx context.Context, out io.Writer) (err error) {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	e, err := newEnv(ctx, cfg)
	defer e.cl.run()
	if err != nil {
		return err
	}
	rep := &report{}
	state := filepath.Join(e.root, "state")
	machine := machineLine(e, e.root)
	binary := binaryLine(e)
	started := time.Now()
	e.logf("machine: %s", machine)
	e.logf("working in %s", e.root)
	var small, large *dataset
	defer func() {
		if small != nil && large != nil {
			rep.add(row{Name: "data_mib/small", Unit: "MiB", Value: small.sizeMiB, N: 1, Note: fmt.Sprintf("pgbench scale %d", small.scale)})
			rep.add(row{Name: "data_mib/large", Unit: "MiB", Value: large.sizeMiB, N: 1, Note: fmt.Sprintf("pgbench scale %d", large.scale)})
		}
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("interrupted (%w)", err)
		}
		addTargets(rep)
		printReport(out, cfg, machine, binary, rep, time.Since(started), loadAvg(), err)
		if cfg.jsonPath != "" {
			if werr := writeJSON(cfg.jsonPath, rep.metrics()); werr != nil && err == nil {
				err = werr
			}
		}
	}()

	px, err := e.startProxy(ctx, state, true)
	if err != nil {
		return err
	}
	e.logf("pgbranchproxy serving on %s (state %s)", px.addr, state)
	sets := []struct {
		name  string
		scale int
		dst   **dataset
	}{{"small", cfg.smallScale, &small}, {"large", cfg.largeScale, &large}}
	if cfg.only != "" {
		sets = sets[:1]
	}
	for _, x := range sets {
		e.logf("data set %s: pgbench -i -s %d", x.name, x.scale)
		d, err := makeDataset(ctx, e, x.name, x.scale)
		if err != nil {
			return fmt.Errorf("data set %s: %w", x.name, err)
		}
		e.logf("data set %s: %.0f MiB; source add --from-datadir", x.name, d.sizeMiB)
		if err := d.seed(ctx, px); err != nil {
			return err
		}
		if err := d.start(ctx, e); err != nil {
			return err
		}
		*x.dst = d
	}
	e.logf("setup done in %s", time.Since(started).Round(time.Second))
	switch cfg.only {
	case "nofork":
		return noFork(ctx, e, small, rep)
	case "containers":
		return containerOverhead(ctx, e, px, small, rep)
	case "relay":
		return throughput(ctx, e, px, small, rep)
	case "roles":
		return roles(ctx, e, px, small, rep)
	}

	if err := newBranches(ctx, e, px, small, large, rep); err != nil {
		return err
	}
	if err := large.stop(); err != nil {
		return err
	}
	if err := wakeAndReset(ctx, e, px, small, rep); err != nil {
		return err
	}
	if err := fanout(ctx, e, px, small, rep); err != nil {
		return err
	}
	if err := throughput(ctx, e, px, small, rep); err != nil {
		return err
	}
	if err := noFork(ctx, e, small, rep); err != nil {
		return err
	}
	if err := roles(ctx, e, px, small, rep); err != nil {
		return err
	}
	if err := footprint(ctx, e, px, small, "owned_mib", rep); err != nil {
		return err
	}
	if err := containerOverhead(ctx, e, px, small, rep); err != nil {
		return err
	}
	e.logf("restarting pgbranchproxy with --lazyrw=off")
	if err := px.stop(); err != nil {
		return err
	}
	eager, err := e.startProxy(ctx, state, false)
	if err != nil {
		return err
	}
	if err := footprint(ctx, e, eager, small, "owned_mib_eager", rep); err != nil {
		return err
	}
	if err := eager.stop(); err != nil {
		return err
	}
	e.logf("done in %s", time.Since(started).Round(time.Second))
	return nil
}

// addTargets records, for each target of the issue, whether this run met it.
func addTargets(rep *report) {
	atLeast := func(x float64) func(float64) bool { return func(v float64) bool { return v >= x } }
	below := func(x float64) func(float64) bool { return func(v float64) bool { return v < x } }
	rep.check("pooled new-branch first query p50 ≤ 5 ms", "new_branch_first_query_ms/p50/pooled", func(v float64) bool { return v <= 5 })
	rep.check("pooled first query ≤ 1.5× a reused connect (paired)", "new_branch_first_query_ratio/pooled_vs_reused", func(v float64) bool { return v <= 1.5 })
	rep.check("fan-out of 20 within the pool: p95 ≤ 3× the single pooled p50", "fanout20_ratio/pooled_p95_vs_single_p50", func(v float64) bool { return v <= 3 })
	rep.check("200-test suite: pooled beats template clones", "test_suite_ratio/pooled_branches_vs_template", below(1))
	rep.check("200-test suite: pooled (--warm 200) within 1.5× one shared database", "test_suite_ratio/pooled_deep_branches_vs_shared", func(v float64) bool { return v <= 1.5 })
	rep.check("proxy with reuse ≥ 1.2× PgBouncer on pgbench -C", "connect_per_txn_ratio/proxy_reuse_vs_pgbouncer", atLeast(1.2))
	rep.check("proxy ≥ PgBouncer, select-only c1 (paired ratio ≥ 1)", "select_only_c1_ratio/proxy_vs_pgbouncer", atLeast(1))
	rep.check("proxy ≥ PgBouncer, select-only c8 (paired ratio ≥ 1)", "select_only_c8_ratio/proxy_vs_pgbouncer", atLeast(1))
	rep.check("new-branch first query p50 < 150 ms (small)", "new_branch_first_query_ms/p50/small", below(150))
	rep.check("new-branch first query p50 < 150 ms (large)", "new_branch_first_query_ms/p50/large", below(150))
	rep.check("new-branch first query large/small < 1.2", "new_branch_first_query_ratio/large_vs_small", below(1.2))
	rep.check("branch within 3% of plain, select-only c1 (ratio ≥ 0.97)", "branch_select_only_ratio/plain", atLeast(0.97))
	rep.check("branch within 3% of plain, select-only c8 (ratio ≥ 0.97)", "branch_select_only_ratio/plain_c8", atLeast(0.97))
	kernelTargets(rep)
	rolesTargets(rep)
}

// printReport writes the markdown report.
func printReport(w io.Writer, cfg config, machine, binary string, rep *report, elapsed time.Duration, loadEnd string, runErr error) {
	kind, cmd := "full", "make bench"
	if cfg.quick {
		kind, cmd = "quick", "BENCH_QUICK=1 make bench"
	}
	fmt.Fprintf(w, "## pgbranchproxy benchmarks (%s run)\n\n", kind)
	fmt.Fprintf(w, "- machine: %s\n", machine)
	fmt.Fprintf(w, "- pgbranchproxy: %s\n", binary)
	fmt.Fprintf(w, "- command: `%s` (`go run ./bench`), %d throughput rounds of %d s per configuration, rotated; wall time %s\n",
		cmd, cfg.rounds, cfg.seconds, elapsed.Round(time.Second))
	fmt.Fprintf(w, "- load average at the end: %s (other work on the machine shows up here and in the ranges)\n", loadEnd)
	if runErr != nil {
		first, _, _ := strings.Cut(runErr.Error(), "\n")
		fmt.Fprintf(w, "- **the run failed; the table holds what was measured before it:** %s\n", first)
	}
	fmt.Fprintln(w)
	rep.markdown(w)
}

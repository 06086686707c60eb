package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// benchImage is the image the container runtime runs (BENCH_IMAGE, default the one
// `make image` builds).
func benchImage() string {
	if img := os.Getenv("BENCH_IMAGE"); img != "" {
		return img
	}
	return "pgbranchproxy/postgres:15"
}

// containerOverhead compares --runtime docker with the process runtime in one run: a
// second proxy with the Docker runtime on its own state directory, seeded from the
// same stopped data set, and for each measure the two runtimes take turns round by
// round (new-branch first query, wake, select-only c1 and c8 through the proxy).
// It is skipped, with a log line, when the image is not on the Engine.
func containerOverhead(ctx context.Context, e *env, px *proxyServer, d *dataset, rep *report) error {
	if err := exec.CommandContext(ctx, "docker", "image", "inspect", benchImage()).Run(); err != nil {
		e.logf("container runtime: image %s not found (make image); skipped", benchImage())
		return nil
	}
	if err := d.stop(); err != nil {
		return err
	}
	dk, err := e.startProxy(ctx, filepath.Join(e.root, "state-docker"), true, "--runtime", "docker", "--image", benchImage())
	if err != nil {
		return err
	}
	defer dk.stop()
	if _, err := dk.cli(ctx, "source", "add", d.name, "--from-datadir", d.dataDir); err != nil {
		return err
	}
	if err := d.start(ctx, e); err != nil {
		return err
	}
	cfg := e.cfg
	runtimes := []struct {
		name string
		px   *proxyServer
	}{{"process", px}, {"docker", dk}}
	samples := map[string][]float64{}
	e.logf("container runtime: new-branch first query, %d rounds", cfg.altRounds*2)
	for r := range cfg.altRounds * 2 {
		for _, i := range rotation(2, r) {
			rt := runtimes[i]
			name := fmt.Sprintf("ct-%d", r)
			dur, err := firstQuery(ctx, rt.px.dsn(d.name+"@"+name))
			if err != nil {
				return fmt.Errorf("%s: first query on new branch: %w", rt.name, err)
			}
			samples["new/"+rt.name] = append(samples["new/"+rt.name], ms(dur))
			if _, err := rt.px.waitIdle(ctx, name); err != nil {
				return err
			}
			if _, err := rt.px.cli(ctx, "branch", "destroy", name); err != nil {
				return err
			}
		}
	}
	e.logf("container runtime: wake, %d rounds", cfg.wakeRounds)
	for _, rt := range runtimes {
		if _, err := firstQuery(ctx, rt.px.dsn(d.name+"@ctwake")); err != nil {
			return err
		}
	}
	for r := range cfg.wakeRounds {
		for _, i := range rotation(2, r) {
			rt := runtimes[i]
			if _, err := rt.px.waitIdle(ctx, "ctwake"); err != nil {
				return err
			}
			if _, err := rt.px.cli(ctx, "branch", "stop", "ctwake"); err != nil {
				return err
			}
			dur, err := firstQuery(ctx, rt.px.dsn(d.name+"@ctwake"))
			if err != nil {
				return fmt.Errorf("%s: wake: %w", rt.name, err)
			}
			samples["wake/"+rt.name] = append(samples["wake/"+rt.name], ms(dur))
		}
	}
	for _, clients := range []int{1, 8} {
		e.logf("container runtime: select-only c%d, %d rounds", clients, cfg.rounds)
		for r := range cfg.rounds + 1 {
			for _, i := range rotation(2, r) {
				rt := runtimes[i]
				w := workload{Clients: clients, SelectOnly: true, Conn: rt.px.dsn(d.name + "@ctwake"), Seconds: cfg.seconds}
				if r == 0 {
					w.Seconds = cfg.warmup
				}
				tps, err := runPgbench(ctx, e, w)
				if err != nil {
					return fmt.Errorf("%s: select-only c%d: %w", rt.name, clients, err)
				}
				if r > 0 {
					key := fmt.Sprintf("c%d/%s", clients, rt.name)
					samples[key] = append(samples[key], tps)
				}
			}
		}
	}
	for _, rt := range runtimes {
		if _, err := rt.px.waitIdle(ctx, "ctwake"); err == nil {
			_, _ = rt.px.cli(ctx, "branch", "destroy", "ctwake")
		}
	}
	if err := containerPool(ctx, e, dk, d, samples["new/docker"], rep); err != nil {
		return err
	}
	rep.series("container_new_branch_first_query_ms/p50/docker", "ms", samples["new/docker"], "--runtime docker: connect + SELECT 1 on a new branch")
	rep.series("container_new_branch_first_query_ms/p50/process", "ms", samples["new/process"], "the same, process runtime, alternating rounds")
	rep.series("container_ratio/new_branch_first_query", "ratio", pairedRatios(samples["new/docker"], samples["new/process"]), "docker / process, paired by round")
	rep.series("container_ratio/wake", "ratio", pairedRatios(samples["wake/docker"], samples["wake/process"]), "docker / process first query after branch stop, paired by round")
	rep.series("container_ratio/select_only_c1", "ratio", pairedRatios(samples["c1/docker"], samples["c1/process"]), "docker / process tps, pgbench -S -c 1 through the proxy, paired")
	rep.series("container_ratio/select_only_c8", "ratio", pairedRatios(samples["c8/docker"], samples["c8/process"]), "docker / process tps, pgbench -S -c 8 through the proxy, paired")
	return nil
}

// containerPool measures what the warm pool buys the container runtime: a third
// proxy, Docker with --warm 3, and a never-seen name's first query on it, against the
// cold creates measured on the Docker proxy without a pool (cold, in round order).
func containerPool(ctx context.Context, e *env, cold *proxyServer, d *dataset, coldMS []float64, rep *report) error {
	if err := d.stop(); err != nil {
		return err
	}
	warm, err := e.startProxy(ctx, filepath.Join(e.root, "state-docker-warm"), true, "--runtime", "docker", "--image", benchImage(),
		"--warm", "3", "--warm-user", "postgres", "--reap-interval", "200ms")
	if err != nil {
		return err
	}
	defer warm.stop()
	_, err = warm.cli(ctx, "source", "add", d.name, "--from-datadir", d.dataDir)
	if serr := d.start(ctx, e); err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	var pooled []float64
	for r := range len(coldMS) {
		if err := warm.waitPooled(ctx, 3); err != nil {
			return err
		}
		dur, err := firstQuery(ctx, warm.dsn(fmt.Sprintf("%s@ctpool-%d", d.name, r)))
		if err != nil {
			return fmt.Errorf("docker, pooled: first query on a new branch: %w", err)
		}
		pooled = append(pooled, ms(dur))
	}
	e.logf("container runtime: pooled first query, %d rounds", len(pooled))
	rep.series("container_new_branch_first_query_ms/p50/docker_pooled", "ms", pooled, "--runtime docker --warm 3: connect + SELECT 1 on a never-seen name")
	rep.series("container_ratio/pooled_vs_cold", "ratio", pairedRatios(pooled, coldMS), "docker pooled / docker cold, by round")
	return nil
}

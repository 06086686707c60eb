package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// config is what the flags set.
type config struct {
	bin, shim  string
	duration   time.Duration
	interval   time.Duration
	clients    int
	branches   int
	workers    int
	idleStop   time.Duration
	resetEvery time.Duration
	ephEvery   time.Duration
	keep       bool
	roles      bool
	nodes      int
	fronts     int
}

func main() {
	var c config
	flag.StringVar(&c.bin, "bin", "bin/pgbranchproxy", "pgbranchproxy binary to run")
	flag.StringVar(&c.shim, "shim", "bin/liblazyrw.so", "lazyrw shim to pass to serve")
	flag.DurationVar(&c.duration, "duration", envDuration("SOAK_DURATION", 10*time.Minute), "how long to run the load (SOAK_DURATION)")
	flag.DurationVar(&c.interval, "interval", 0, "sampling interval (0: a minute, or a sixth of the run when shorter)")
	flag.IntVar(&c.clients, "clients", 1000, "clients, each with its own rows")
	flag.IntVar(&c.branches, "branches", 50, "branches the clients are spread over")
	flag.IntVar(&c.workers, "workers", 16, "sessions open at once")
	flag.DurationVar(&c.idleStop, "idle-stop", 3*time.Second, "serve's --idle-stop")
	flag.DurationVar(&c.resetEvery, "reset-every", 5*time.Second, "how often a branch is reset")
	flag.DurationVar(&c.ephEvery, "ephemeral-every", time.Second, "how often an ephemeral branch is made")
	flag.BoolVar(&c.keep, "keep", false, "keep the state directory")
	flag.BoolVar(&c.roles, "roles", false, "run fronts and nodes on a Postgres catalog instead of one server; each session goes to a front chosen at random")
	flag.IntVar(&c.nodes, "nodes", 2, "nodes, with --roles")
	flag.IntVar(&c.fronts, "fronts", 2, "fronts, with --roles")
	flag.Parse()
	if c.roles && (c.nodes < 1 || c.fronts < 1) {
		fmt.Fprintln(os.Stderr, "soak: --roles needs at least one node and one front")
		os.Exit(2)
	}
	if c.interval <= 0 {
		c.interval = min(time.Minute, c.duration/6)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "soak: FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("soak: PASS")
}

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
		fmt.Fprintf(os.Stderr, "soak: %s=%q is not a duration\n", name, v)
		os.Exit(2)
	}
	return def
}

// run starts the system under test, soaks it, stops it and judges.
func run(ctx context.Context, c config) error {
	if os.Geteuid() != 0 {
		return errors.New("the soak needs root: serve mounts OverlayFS and starts Postgres as another user")
	}
	var err error
	if c.bin, err = filepath.Abs(c.bin); err != nil {
		return err
	}
	if c.shim, err = filepath.Abs(c.shim); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "pgbranch-soak-")
	if err != nil {
		return err
	}
	os.Chmod(dir, 0o711)
	failed := true
	defer func() {
		if c.keep || failed {
			fmt.Printf("soak: state and logs kept in %s\n", dir)
		} else {
			os.RemoveAll(dir)
		}
	}()
	start := startSingle
	if c.roles {
		start = startRoles
	}
	sys, err := start(ctx, c, dir)
	if err != nil {
		return err
	}
	defer sys.stop()
	problems, err := soak(ctx, c, sys)
	// Stopped, and what is left removed, whether or not the soak went to its end.
	if err := sys.stop(); err != nil {
		problems = append(problems, err.Error())
	}
	problems = append(problems, sys.leftovers()...)
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "soak:", p)
	}
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problems", len(problems))
	}
	failed = false
	return nil
}

// soak warms the branches, drives the load for c.duration while sampling, and
// lists what went wrong, the system still running.
func soak(ctx context.Context, c config, sys *system) ([]string, error) {
	fmt.Printf("soak: %d clients over %d branches, %d at once, for %s; reaper 1s, idle stop %s, a reset every %s, an ephemeral branch every %s; samples every %s\n",
		c.clients, c.branches, c.workers, c.duration, c.idleStop, c.resetEvery, c.ephEvery, c.interval)
	l := newLoad(c, sys)
	probe := startProbe(sys.cat)
	warmStart := time.Now()
	if err := l.warm(ctx); err != nil {
		probe.report(os.Stdout)
		return nil, err
	}
	fmt.Printf("soak: %d branches created in %s\n", c.branches, time.Since(warmStart).Round(time.Millisecond))
	rec := &recorder{sys: sys}
	rec.sample("start", 0)
	lctx, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()
	done := make(chan struct{})
	go func() { l.run(lctx); close(done) }()
	start := time.Now()
	tick := time.NewTicker(c.interval)
loop:
	for {
		select {
		case <-tick.C:
			rec.sample("load", time.Since(start))
		case <-done:
			break loop
		}
	}
	tick.Stop()
	probe.report(os.Stdout)
	rec.sample("end", time.Since(start))
	if ctx.Err() != nil {
		return nil, errors.New("interrupted")
	}
	var problems []string
	problems = append(problems, l.problems()...)
	problems = append(problems, sys.quiesce(ctx)...)
	rec.sample("quiet", time.Since(start))
	problems = append(problems, rec.judge(c.duration)...)
	problems = append(problems, sys.placement(ctx)...)
	rec.print(os.Stdout)
	l.summary(os.Stdout)
	return problems, nil
}

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// config is what one run does, from BRANCHBENCH_* and BENCH_* variables.
type config struct {
	workflows   []workflow
	scale       seedScale
	concurrency int           // client connections at once
	maxRunning  int           // --max-running of the proxy
	idleStop    time.Duration // --idle-stop of the proxy
	sampleEvery time.Duration
	binDir      string // pgbranchproxy and liblazyrw.so
	jsonPath    string
	keep        bool
	progress    io.Writer
}

// quickWorkflows are the five tuples with fewer workers or steps (fanouts, depth, γ
// and the per-step work unchanged), for a run under three minutes.
func quickWorkflows() []workflow {
	out := append([]workflow(nil), workflows...)
	for i := range out {
		switch out[i].Name {
		case "simulation":
			out[i].T = 40
		case "data_cleaning":
			out[i].S = 3
		case "software_dev":
			out[i].S = 4
		case "mcts":
			out[i].T, out[i].S = 2, 26
		}
	}
	return out
}

func loadConfig() (config, error) {
	c := config{workflows: workflows, scale: defaultScale, concurrency: 8, maxRunning: 12, idleStop: 5 * time.Second,
		sampleEvery: 5 * time.Second, jsonPath: os.Getenv("BENCH_JSON"), keep: os.Getenv("BENCH_KEEP") == "1", progress: os.Stderr}
	if v := os.Getenv("BRANCHBENCH_QUICK"); v != "" && v != "0" {
		c.workflows, c.scale.Warehouses, c.sampleEvery = quickWorkflows(), 2, 2*time.Second
	}
	for name, p := range map[string]*int{"BRANCHBENCH_CONCURRENCY": &c.concurrency, "BRANCHBENCH_MAX_RUNNING": &c.maxRunning} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return c, fmt.Errorf("%s=%q: want a positive integer", name, v)
			}
			*p = n
		}
	}
	if v := os.Getenv("BRANCHBENCH_WORKFLOWS"); v != "" {
		var keep []workflow // in the order given
		for _, name := range strings.Split(v, ",") {
			for _, w := range c.workflows {
				if w.Name == strings.TrimSpace(name) {
					keep = append(keep, w)
				}
			}
		}
		if len(keep) == 0 {
			return c, fmt.Errorf("BRANCHBENCH_WORKFLOWS=%q names none of simulation, data_cleaning, software_dev, mcts, failure_repro", v)
		}
		c.workflows = keep
	}
	if v := os.Getenv("BRANCHBENCH_STEPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, fmt.Errorf("BRANCHBENCH_STEPS=%q: want a positive integer", v)
		}
		c.workflows = slices.Clone(c.workflows)
		for i := range c.workflows {
			c.workflows[i].S = n
		}
	}
	c.binDir = os.Getenv("BENCH_BIN")
	if c.binDir == "" {
		c.binDir = "bin"
	}
	for _, f := range []string{"pgbranchproxy", "liblazyrw.so"} {
		if _, err := os.Stat(filepath.Join(c.binDir, f)); err != nil {
			return c, fmt.Errorf("%s: %w (run `make build` first, or `make bench-branchbench`)", f, err)
		}
	}
	return c, nil
}

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	cfg, err := loadConfig()
	if err == nil {
		err = run(ctx, cfg, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "branchbench:", err)
		os.Exit(1)
	}
}

func (c config) logf(format string, args ...any) {
	fmt.Fprintf(c.progress, "branchbench %s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// run seeds a source, runs every workflow against one proxy (removing each one's
// branches before the next starts) and prints the report.
func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root: the proxy mounts OverlayFS and runs Postgres as another user")
	}
	start := time.Now()
	root, err := os.MkdirTemp("", "pgbranch-branchbench-")
	if err != nil {
		return err
	}
	os.Chmod(root, 0o711)
	defer func() {
		if cfg.keep {
			cfg.logf("kept %s", root)
		} else if rerr := os.RemoveAll(root); rerr != nil && err == nil {
			err = rerr
		}
	}()
	sqlFile := filepath.Join(root, dbName+".sql")
	if err := writeSeedFile(sqlFile, cfg.scale); err != nil {
		return err
	}
	p, err := startProxy(ctx, cfg, root)
	if err != nil {
		return err
	}
	defer func() {
		if serr := p.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	machine := machineLine(p.state, findPGBin())
	t := time.Now()
	if err := p.addSource(ctx, dbName, sqlFile); err != nil {
		return err
	}
	size, err := seedSize(ctx, p)
	if err != nil {
		return err
	}
	cfg.logf("seed %s ready in %.1f s: %d warehouses, database %s", dbName, time.Since(t).Seconds(), cfg.scale.Warehouses, mib(size))
	machine += fmt.Sprintf(", seed %s (%d warehouses), concurrency %d, --max-running %d, --idle-stop %s",
		mib(size), cfg.scale.Warehouses, cfg.concurrency, cfg.maxRunning, cfg.idleStop)
	var results []*result
	for _, w := range cfg.workflows {
		cfg.logf("%s: %d workers x %d steps", w.Name, w.T, w.S)
		r, _, err := runWorkflow(ctx, cfg, p, w)
		if err != nil {
			if r != nil { // interrupted: report what was done
				writeTable(out, machine+" (interrupted)", append(results, r), time.Since(start))
			}
			return fmt.Errorf("%s: %w", w.Name, err)
		}
		cfg.logf("%s: %d/%d steps in %.1f s, max depth %d, %d failed%s", w.Name, r.Completed, w.steps(), r.Wall.Seconds(), r.MaxDepth, r.Failed, errNote(r.Errors))
		results = append(results, r)
		var row strings.Builder
		writeRows(&row, []*result{r})
		cfg.logf("%s: %s", w.Name, strings.TrimSpace(row.String()))
		if err := removeAll(ctx, p, cfg.concurrency); err != nil {
			return fmt.Errorf("remove the branches of %s: %w", w.Name, err)
		}
	}
	total := time.Since(start)
	machine += ", load average at the end " + loadAvg()
	writeTable(out, machine, results, total)
	if cfg.jsonPath != "" {
		return writeJSON(cfg.jsonPath, metrics(machine, results, total))
	}
	return nil
}

// writeSeedFile writes the generated seed SQL to path, readable by the Postgres user.
func writeSeedFile(path string, s seedScale) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := writeSeed(w, s); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// seedSize is the size of the seeded database, read on a branch made for it.
func seedSize(ctx context.Context, p *proxy) (int64, error) {
	c, err := pgx.Connect(ctx, p.dsn(dbName, "size-probe", ""))
	if err != nil {
		return 0, fmt.Errorf("connect to the seed: %w", err)
	}
	var n int64
	err = c.QueryRow(ctx, "SELECT pg_database_size(current_database())").Scan(&n)
	c.Close(ctx)
	if err != nil {
		return 0, err
	}
	return n, p.destroy(ctx, "size-probe")
}

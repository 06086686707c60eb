package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// config is what one run measures and for how long, from BENCH_* variables.
type config struct {
	quick            bool
	rounds           int // throughput rounds
	seconds          int // one pgbench run
	warmup           int // seconds of the unmeasured first run of each configuration
	smallScale       int // pgbench scale of the small data set (also the throughput data)
	largeScale       int
	newBranchRounds  int // rounds of new-branch first queries (one small, one large each)
	altRounds        int // of those, rounds that also time the per-test alternatives
	wakeRounds       int
	resetRounds      int
	fanoutRounds     int // rounds of 20 simultaneous new branches
	footprintSeconds int // each pgbench run of the owned-bytes phase
	jsonPath         string
	keep             bool
	only             string // BENCH_ONLY: "nofork", "containers", "relay" (throughput) or "roles" runs only that phase (small data set)
}

func loadConfig() (config, error) {
	c := config{rounds: 7, seconds: 8, warmup: 3, smallScale: 7, largeScale: 68,
		newBranchRounds: 20, altRounds: 5, wakeRounds: 10, resetRounds: 10, fanoutRounds: 3, footprintSeconds: 10}
	if os.Getenv("BENCH_QUICK") != "" && os.Getenv("BENCH_QUICK") != "0" {
		c = config{quick: true, rounds: 3, seconds: 2, warmup: 1, smallScale: 1, largeScale: 13,
			newBranchRounds: 6, altRounds: 2, wakeRounds: 3, resetRounds: 3, fanoutRounds: 1, footprintSeconds: 2}
	}
	c.only = os.Getenv("BENCH_ONLY")
	if c.only != "" && c.only != "nofork" && c.only != "containers" && c.only != "relay" && c.only != "roles" {
		return c, fmt.Errorf("BENCH_ONLY=%q: the phases that run alone are nofork, containers, relay and roles", c.only)
	}
	for name, p := range map[string]*int{"BENCH_ROUNDS": &c.rounds, "BENCH_SECONDS": &c.seconds} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return c, fmt.Errorf("%s=%q: want a positive integer", name, v)
			}
			*p = n
		}
	}
	c.jsonPath = os.Getenv("BENCH_JSON")
	c.keep = os.Getenv("BENCH_KEEP") == "1"
	return c, nil
}

// cleanups runs registered stop and remove functions in reverse order, once. Safe
// for concurrent use.
type cleanups struct {
	mu  sync.Mutex
	fns []cleanupFn
}

type cleanupFn struct {
	name string
	fn   func() error
}

func (c *cleanups) push(name string, fn func() error) {
	c.mu.Lock()
	c.fns = append(c.fns, cleanupFn{name, fn})
	c.mu.Unlock()
}

// run calls every function, newest first, and reports failures on stderr.
func (c *cleanups) run() {
	c.mu.Lock()
	fns := c.fns
	c.fns = nil
	c.mu.Unlock()
	for _, f := range slices.Backward(fns) {
		if err := f.fn(); err != nil {
			fmt.Fprintf(os.Stderr, "bench: cleanup %s: %v\n", f.name, err)
		}
	}
}

// env is what every phase needs: binaries, the temporary root, the postgres OS
// user and the cleanup stack. Not safe for concurrent mutation; phases read it.
type env struct {
	cfg          config
	root         string // temporary directory (0711) holding everything this run makes
	pgBin        string // PostgreSQL server binaries
	pgbench      string
	pgbouncerBin string
	binDir       string // where pgbranchproxy and liblazyrw.so were copied from
	proxyBin     string // private copies, so a rebuild during the run changes nothing
	shim         string
	pgUser       osUser
	cores        int
	cl           *cleanups
	progress     io.Writer
}

// newEnv finds the binaries, installs PgBouncer when missing and makes the
// temporary root. The caller runs e.cl.run() whatever happens.
func newEnv(ctx context.Context, cfg config) (*env, error) {
	e := &env{cfg: cfg, cores: runtime.NumCPU(), cl: &cleanups{}, progress: os.Stderr}
	if os.Geteuid() != 0 {
		return e, fmt.Errorf("needs root: the proxy mounts OverlayFS and runs Postgres as another user")
	}
	var err error
	if e.pgUser, err = lookupUser("postgres"); err != nil {
		return e, err
	}
	if e.pgBin, err = findPGBin(); err != nil {
		return e, err
	}
	e.pgbench = filepath.Join(e.pgBin, "pgbench")
	if e.pgbouncerBin, err = ensurePgbouncer(ctx, e); err != nil {
		return e, err
	}
	binDir := os.Getenv("BENCH_BIN")
	if binDir == "" {
		mod, err := moduleRoot()
		if err != nil {
			return e, err
		}
		binDir = filepath.Join(mod, "bin")
	}
	e.binDir = binDir
	for _, f := range []string{"pgbranchproxy", "liblazyrw.so"} {
		if _, err := os.Stat(filepath.Join(binDir, f)); err != nil {
			return e, fmt.Errorf("%s: %w (run `make build` first, or `make bench`)", f, err)
		}
	}
	if e.root, err = os.MkdirTemp("", "pgbranch-bench-"); err != nil {
		return e, err
	}
	root := e.root
	e.cl.push("remove "+root, func() error { return removeRoot(root, cfg.keep) })
	if err := os.Chmod(root, 0o711); err != nil {
		return e, err
	}
	for _, d := range []string{"bin", "logs"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			return e, err
		}
	}
	e.proxyBin = filepath.Join(root, "bin", "pgbranchproxy")
	e.shim = filepath.Join(root, "bin", "liblazyrw.so")
	for _, f := range []string{"pgbranchproxy", "liblazyrw.so"} {
		if out, err := exec.CommandContext(ctx, "cp", filepath.Join(binDir, f), filepath.Join(root, "bin", f)).CombinedOutput(); err != nil {
			return e, fmt.Errorf("copy %s: %v: %s", f, err, out)
		}
	}
	return e, nil
}

// logf prints one progress line on stderr.
func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(e.progress, "bench %s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// logPath is the log file of a process this run starts.
func (e *env) logPath(name string) string {
	return filepath.Join(e.root, "logs", name+".log")
}

// removeRoot removes the temporary root after a last check that nothing is left
// mounted or running under it (the proxy should have cleaned up already; this is a
// safety net that says so when it had to act).
func removeRoot(root string, keep bool) error {
	var problems []string
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], root+"/") {
			problems = append(problems, "mount left behind: "+f[4])
			_ = syscall.Unmount(f[4], syscall.MNT_DETACH)
		}
	}
	for _, pid := range postmastersUnder(root) {
		problems = append(problems, fmt.Sprintf("postmaster %d left running under %s; sent SIGQUIT", pid, root))
		_ = syscall.Kill(pid, syscall.SIGQUIT)
	}
	if len(problems) > 0 {
		time.Sleep(2 * time.Second)
	}
	if keep {
		problems = append(problems, "kept "+root+" (BENCH_KEEP=1)")
	} else if err := os.RemoveAll(root); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// postmastersUnder lists processes whose -D is under dir.
func postmastersUnder(dir string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-D" && strings.HasPrefix(args[i+1], dir+"/") {
				out = append(out, pid)
			}
		}
	}
	return out
}

// findPGBin returns BENCH_PG_BIN, else pg_config --bindir when it has postgres,
// else the newest /usr/lib/postgresql/<major>/bin.
func findPGBin() (string, error) {
	if d := os.Getenv("BENCH_PG_BIN"); d != "" {
		return d, nil
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	best, bestMajor := "", -1
	for _, m := range matches {
		major, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(m))))
		if err == nil && major > bestMajor {
			best, bestMajor = filepath.Dir(m), major
		}
	}
	if best == "" {
		return "", fmt.Errorf("no PostgreSQL server binaries (set BENCH_PG_BIN)")
	}
	return best, nil
}

// ensurePgbouncer returns the pgbouncer binary, installing the Debian package when
// it is missing. The package's own service is never started by this harness.
func ensurePgbouncer(ctx context.Context, e *env) (string, error) {
	find := func() string {
		if p, err := exec.LookPath("pgbouncer"); err == nil {
			return p
		}
		if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
			return "/usr/sbin/pgbouncer"
		}
		return ""
	}
	if p := find(); p != "" {
		return p, nil
	}
	e.logf("pgbouncer not found; installing the Debian package")
	// Keep the package's postinst from starting its system service: Debian's
	// invoke-rc.d asks /usr/sbin/policy-rc.d, and 101 means "action forbidden".
	// An existing policy is left alone; ours is removed after the install.
	const policy = "/usr/sbin/policy-rc.d"
	if _, err := os.Lstat(policy); os.IsNotExist(err) {
		if err := os.WriteFile(policy, []byte("#!/bin/sh\n# written by pgbranchproxy's bench while it installs pgbouncer\nexit 101\n"), 0o755); err != nil {
			return "", fmt.Errorf("write %s: %w", policy, err)
		}
		defer os.Remove(policy)
	}
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "--no-install-recommends", "pgbouncer"}} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, tail(string(out), 10))
		}
	}
	if p := find(); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("pgbouncer still missing after apt-get install")
}

// moduleRoot walks up from the working directory to the directory with go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			isOurs := sc.Scan() && strings.Contains(sc.Text(), "pgbranchproxy")
			f.Close()
			if isOurs {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("not inside the pgbranchproxy module (set BENCH_BIN)")
		}
		dir = parent
	}
}

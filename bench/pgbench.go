package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// workload is one pgbench run against one connection string.
type workload struct {
	Conn          string // libpq connection string (pgbench expands it as dbname)
	Clients       int    // -c
	Seconds       int    // -T
	SelectOnly    bool   // -S (built-in select-only); otherwise TPC-B-like
	ConnectPerTxn bool   // -C (a new connection for every transaction)
}

// args returns pgbench's arguments for w. Threads are min(clients, cores) so that
// pgbench itself is not the bottleneck at -c 8; -n skips the vacuum pgbench
// otherwise runs first, which would write into the target.
func (w workload) args(cores int) []string {
	threads := max(1, min(w.Clients, cores))
	a := []string{"-n", "-c", strconv.Itoa(w.Clients), "-j", strconv.Itoa(threads), "-T", strconv.Itoa(w.Seconds)}
	if w.SelectOnly {
		a = append(a, "-S")
	}
	if w.ConnectPerTxn {
		a = append(a, "-C")
	}
	return append(a, w.Conn)
}

var (
	tpsRe    = regexp.MustCompile(`(?m)^tps = ([0-9]+(?:\.[0-9]+)?)`)
	failedRe = regexp.MustCompile(`(?m)^number of failed transactions: ([0-9]+)`)
)

// parseTPS reads the throughput from pgbench's summary ("tps = 1234.5 (without
// initial connection time)" or "(including reconnection times)" with -C). A run
// that reports failed transactions is an error: its tps would flatter the target.
func parseTPS(out string) (float64, error) {
	if m := failedRe.FindStringSubmatch(out); m != nil && m[1] != "0" {
		return 0, fmt.Errorf("pgbench reported %s failed transactions", m[1])
	}
	m := tpsRe.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no \"tps = \" line in pgbench output")
	}
	return strconv.ParseFloat(m[1], 64)
}

// runPgbench runs pgbench for w and returns its tps. Ctrl-C interrupts it.
func runPgbench(ctx context.Context, e *env, w workload) (float64, error) {
	cmd := exec.CommandContext(ctx, e.pgbench, w.args(e.cores)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "PGCONNECT_TIMEOUT=60"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench %s: %w\n%s", strings.Join(w.args(e.cores), " "), err, tail(string(out), 10))
	}
	tps, err := parseTPS(string(out))
	if err != nil {
		return 0, fmt.Errorf("pgbench %s: %w\n%s", strings.Join(w.args(e.cores), " "), err, tail(string(out), 10))
	}
	return tps, nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

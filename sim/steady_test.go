//go:build simmeasure

package sim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	brt "github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
)

// M2's pgbench runs: a warm-up of steadyWarmup seconds per path, then
// SIM_M2_ROUNDS rounds (default 5) of steadySeconds, the paths rotated from
// round to round.
const (
	steadyWarmup  = 2
	steadySeconds = 5
)

// benchPath is one way to the same data for pgbench: a libpq connection string.
type benchPath struct {
	name string
	conn string
}

// testSteadyState is M2: pgbench -S at 1 and 8 clients from the client host
// through each path to a branch initialized with pgbench -i: node-1's branch
// server over its unix socket, node-1 directly (mutual TLS, with a front's
// certificate), front-1 to node-1 (mutual TLS between them); the same three for
// the plain pair (plain TCP between front and node); and the single-host server.
// Every run must complete without a failed transaction; the tps, their paired
// ratios and the time the front's hop adds are logged.
func testSteadyState(t *testing.T, ctx context.Context, c *cluster, x *extras) {
	rounds := repetitions(t, "SIM_M2_ROUNDS", 5)
	bin, err := brt.Binaries{}.Find("15")
	if err != nil {
		t.Fatal(err)
	}
	pgbench := filepath.Join(bin, "pgbench")
	node := c.nodes[0]
	x.createOn(t, ctx, c, node, "m2")
	for _, m := range []*member{x.single, x.plainNode} {
		if _, err := plain(m.name, m).firstQuery(ctx, "app@m2"); err != nil {
			t.Fatal(err)
		}
	}
	unix := func(m *member) string {
		dsn := branchSocketDSN(t, m, "m2")
		if out, err := c.pgbench(ctx, pgbench, "-i", "-s", "1", "-q", dsn); err != nil {
			t.Fatalf("pgbench -i on %s's m2: %v\n%s", m.name, err, out)
		}
		return dsn
	}
	paths := []benchPath{
		{"node-1's branch server (unix socket)", unix(node)},
		{"node-1 directly (mTLS)", x.direct(node.name, node).dsn("app@m2")},
		{"front-1 + node-1 (mTLS)", plain("front-1", c.fronts[0]).dsn("app@m2")},
		{"plain node's branch server (unix socket)", unix(x.plainNode)},
		{"plain node directly (TCP)", plain("plain node", x.plainNode).dsn("app@m2")},
		{"plain front + plain node (TCP)", plain("plain front", x.plainFront).dsn("app@m2")},
		{"single-host proxy", plain("single", x.single).dsn("app@m2")},
	}
	unix(x.single)
	for _, clients := range []int{1, 8} {
		run := func(pa benchPath, seconds int) float64 {
			threads := min(clients, 2)
			out, err := c.pgbench(ctx, pgbench, "-n", "-S", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(threads),
				"-T", strconv.Itoa(seconds), pa.conn)
			tps, perr := parseTPS(out)
			if err != nil || perr != nil {
				t.Fatalf("pgbench -S -c %d through %s: %v %v\n%s", clients, pa.name, err, perr, out)
			}
			return tps
		}
		for _, pa := range paths {
			run(pa, steadyWarmup)
		}
		tps := make([][]float64, len(paths)) // [path][round]
		for r := range rounds {
			for _, i := range rotation(len(paths), r) {
				tps[i] = append(tps[i], run(paths[i], steadySeconds))
			}
		}
		logSteady(t, clients, paths, tps)
	}
}

// logSteady logs each path's tps, the paired ratios and the time per query the
// front's hop adds, for pgbench at clients.
func logSteady(t *testing.T, clients int, paths []benchPath, tps [][]float64) {
	for i, pa := range paths {
		t.Logf("M2 c%d %-42s median %8.0f tps (rounds %s)", clients, pa.name, median(tps[i]), joinFloats(tps[i], "%.0f"))
	}
	ratio := func(a, b int) {
		rs := make([]float64, len(tps[a]))
		for r := range rs {
			rs[r] = tps[a][r] / tps[b][r]
		}
		t.Logf("M2 c%d %s / %s: median %.2f (rounds %s)", clients, paths[a].name, paths[b].name, median(rs), joinFloats(rs, "%.2f"))
	}
	added := func(a, b int) {
		// The time per query of one client: clients / tps.
		us := make([]float64, len(tps[a]))
		for r := range us {
			us[r] = float64(clients) * 1e6 * (1/tps[a][r] - 1/tps[b][r])
		}
		t.Logf("M2 c%d %s adds %.0f µs per query to %s (median; rounds %s)", clients, paths[a].name, median(us), paths[b].name, joinFloats(us, "%.0f"))
	}
	ratio(1, 0)
	ratio(2, 1)
	added(2, 1)
	ratio(4, 3)
	ratio(5, 4)
	added(5, 4)
	ratio(2, 5)
	ratio(6, 0)
}

// pgbench runs pgbench on the client host and returns its output.
func (c *cluster) pgbench(ctx context.Context, prog string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "PGCONNECT_TIMEOUT=30", "PGGSSENCMODE=disable"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := startIn(c.cli.ns, cmd); err != nil {
		return "", err
	}
	err := cmd.Wait()
	return out.String(), err
}

var (
	tpsLine    = regexp.MustCompile(`(?m)^tps = ([0-9]+(?:\.[0-9]+)?)`)
	failedLine = regexp.MustCompile(`(?m)^number of failed transactions: ([0-9]+)`)
)

// parseTPS reads pgbench's tps; a run with failed transactions is an error.
func parseTPS(out string) (float64, error) {
	if m := failedLine.FindStringSubmatch(out); m != nil && m[1] != "0" {
		return 0, fmt.Errorf("pgbench reported %s failed transactions", m[1])
	}
	m := tpsLine.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf(`no "tps = " line in pgbench's output`)
	}
	return strconv.ParseFloat(m[1], 64)
}

// branchSocketDSN is the connection string of database app on the server of
// m's branch name, over its unix socket (a path, which no network namespace
// hides), read from the postmaster's command line.
func branchSocketDSN(t *testing.T, m *member, name string) string {
	t.Helper()
	b, ok := m.branches(t)[name]
	if !ok || b.PID == 0 {
		t.Fatalf("%s runs no server for %s", m.name, name)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", b.PID))
	if err != nil {
		t.Fatal(err)
	}
	dir, port := "", "5432"
	for _, a := range strings.Split(string(cmdline), "\x00") {
		if v, ok := strings.CutPrefix(a, "unix_socket_directories="); ok {
			dir = strings.Split(v, ",")[0]
		}
		if v, ok := strings.CutPrefix(a, "port="); ok {
			port = v
		}
	}
	if dir == "" {
		t.Fatalf("%s's server %d: no unix_socket_directories in %q", name, b.PID, cmdline)
	}
	return fmt.Sprintf("host=%s port=%s user=postgres dbname=app sslmode=disable", dir, port)
}

// median of xs (which it sorts a copy of).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func joinFloats(xs []float64, format string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, " ")
}

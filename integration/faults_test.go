package integration

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// faultCase is one fault: a failpoint rule scoped to the case's own branch, the
// operation that meets it, and the repair and checks after it.
type faultCase struct {
	name  string
	rule  string
	setup func(t *testing.T, s *server)
	act   func(t *testing.T, s *server) // meets the fault; errors are expected
	after func(t *testing.T, s *server) // retry and check
}

// Faults met while serve keeps running: the branch's postmaster killed during each
// operation, and an error from each external step.
func liveFaults() []faultCase {
	use := func(b string) func(*testing.T, *server) {
		return func(t *testing.T, s *server) { psqlWith(s, "app@"+b, "SELECT 1") }
	}
	return []faultCase{
		{name: "kill during create", rule: "catalog.running@k-create=1*kill",
			act:   use("k-create"),
			after: func(t *testing.T, s *server) { mustRead(t, s, "k-create", "seed") }},
		{name: "kill during wake", rule: "catalog.running@k-wake=1>1*kill",
			setup: func(t *testing.T, s *server) { mustWrite(t, s, "k-wake", "w"); s.mustCLI("branch", "stop", "k-wake") },
			act:   use("k-wake"),
			after: func(t *testing.T, s *server) { mustRead(t, s, "k-wake", "w") }},
		{name: "kill during stop", rule: "pg_stop@k-stop=1*kill",
			setup: func(t *testing.T, s *server) { mustWrite(t, s, "k-stop", "s") },
			act:   func(t *testing.T, s *server) { s.cli("branch", "stop", "k-stop") },
			after: func(t *testing.T, s *server) { checkAgree(t, s); mustRead(t, s, "k-stop", "s") }},
		{name: "kill during reset", rule: "catalog.running@k-reset=1>1*kill",
			setup: func(t *testing.T, s *server) { mustWrite(t, s, "k-reset", "r") },
			act:   func(t *testing.T, s *server) { s.cli("branch", "reset", "k-reset") },
			after: func(t *testing.T, s *server) { mustRead(t, s, "k-reset", "seed") }},
		// An open session on the parent makes the fork copy it online.
		{name: "kill parent during fork", rule: "fork@k-forkp=1*kill",
			setup: func(t *testing.T, s *server) { mustWrite(t, s, "k-forkp", "p"); s.connect(t, "app@k-forkp") },
			act: func(t *testing.T, s *server) {
				psqlWith(s, "app@k-forkc", "SELECT 1", "options='-c pgbranch.from=k-forkp'")
			},
			after: func(t *testing.T, s *server) {
				if out, err := psqlWith(s, "app@k-forkc", "SELECT v FROM t WHERE id = 1", "options='-c pgbranch.from=k-forkp'"); err != nil || out != "p" {
					t.Fatalf("fork after the parent was killed: %q %v\n%s", out, err, s.logs())
				}
				mustRead(t, s, "k-forkp", "p")
			}},
		// A new branch of a seed records the seed's roles: the first read of its
		// roles is the reaper's, after a use.
		{name: "kill during roles refresh", rule: "roles@k-roles=1*kill",
			act: func(t *testing.T, s *server) {
				use("k-roles")(t, s) // a use: the next reaper pass reads its roles
				eventually(t, 10*time.Second, "roles refresh killed the server", func() bool {
					return strings.Contains(s.logs(), `"branch": "k-roles", "log"`)
				})
			},
			after: func(t *testing.T, s *server) { mustRead(t, s, "k-roles", "seed") }},
		{name: "kill during destroy", rule: "catalog.destroying@k-destroy=1*kill",
			setup: use("k-destroy"),
			act:   func(t *testing.T, s *server) { s.cli("branch", "destroy", "k-destroy") },
			after: func(t *testing.T, s *server) {
				if _, ok := s.branches()["k-destroy"]; ok {
					s.mustCLI("branch", "destroy", "k-destroy")
				}
			}},
		{name: "mount fails", rule: "mount@e-mount=1*error",
			act:   use("e-mount"),
			after: func(t *testing.T, s *server) { mustRead(t, s, "e-mount", "seed") }},
		{name: "pg_ctl fails", rule: "pg_ctl@e-pgctl=1*error",
			act:   use("e-pgctl"),
			after: func(t *testing.T, s *server) { mustRead(t, s, "e-pgctl", "seed") }},
		// A wake that fails leaves the branch stopped, saying why, not starting.
		{name: "pg_ctl fails at wake", rule: "pg_ctl@e-wake=1>1*error",
			setup: func(t *testing.T, s *server) { mustWrite(t, s, "e-wake", "w"); s.mustCLI("branch", "stop", "e-wake") },
			act:   use("e-wake"),
			after: func(t *testing.T, s *server) {
				if b := s.branches()["e-wake"]; b.State != "stopped" || b.Error == "" {
					t.Errorf("after a failed wake: state %q, error %q; want stopped, saying why", b.State, b.Error)
				}
				mustRead(t, s, "e-wake", "w")
				if b := s.branches()["e-wake"]; b.State != "running" || b.Error != "" {
					t.Errorf("after the next wake: state %q, error %q", b.State, b.Error)
				}
			}},
		{name: "unmount fails", rule: "unmount@e-unmount=1*error",
			setup: func(t *testing.T, s *server) { mustWrite(t, s, "e-unmount", "u") },
			act: func(t *testing.T, s *server) {
				if out, err := s.cli("branch", "stop", "e-unmount"); err == nil {
					t.Errorf("stop with a failing unmount succeeded: %s", out)
				}
			},
			after: func(t *testing.T, s *server) {
				s.mustCLI("branch", "stop", "e-unmount")
				mustRead(t, s, "e-unmount", "u")
			}},
		{name: "usage walk fails", rule: "usage@e-usage=error",
			setup: func(t *testing.T, s *server) { mustWrite(t, s, "e-usage", "x") },
			act:   func(t *testing.T, s *server) { s.mustCLI("branch", "stop", "e-usage") },
			after: func(t *testing.T, s *server) { mustRead(t, s, "e-usage", "x") }},
		{name: "initdb fails", rule: "initdb@e-src=1*error",
			act: func(t *testing.T, s *server) {
				f := filepath.Join(filepath.Dir(s.state), "e-src.sql")
				os.WriteFile(f, []byte(lifecycleSQL), 0o644)
				if out, err := s.cli("source", "add", "e-src", "--from-sql", f); err == nil {
					t.Errorf("source add with a failing initdb succeeded: %s", out)
				}
			},
			after: func(t *testing.T, s *server) {
				if out := s.mustCLI("source", "ls"); strings.Contains(out, "e-src") {
					t.Errorf("failed source left in the catalog:\n%s", out)
				}
				for _, d := range []string{"build", filepath.Join("seeds", "e-src")} {
					if entries, _ := os.ReadDir(filepath.Join(s.state, d)); len(entries) > 0 {
						t.Errorf("failed seed build left %s/%s", d, entries[0].Name())
					}
				}
			}},
	}
}

// Crashes of serve after each catalog transition of each operation; each is
// repaired by the next start's reconcile.
func crashFaults() []faultCase {
	layersBefore := 0
	return []faultCase{
		{name: "crash after creating", rule: "catalog.creating@c-create=1*crash",
			act: func(t *testing.T, s *server) { psqlWith(s, "app@c-create", "SELECT 1") },
			after: func(t *testing.T, s *server) {
				if b, ok := s.branches()["c-create"]; ok {
					t.Errorf("half-created branch survived: %+v", b)
				}
				mustRead(t, s, "c-create", "seed")
			}},
		{name: "crash after running", rule: "catalog.running@c-run=1*crash",
			act:   func(t *testing.T, s *server) { psqlWith(s, "app@c-run", "SELECT 1") },
			after: func(t *testing.T, s *server) { mustRead(t, s, "c-run", "seed") }},
		{name: "crash after starting", rule: "catalog.starting@c-wake=1*crash",
			setup: func(t *testing.T, s *server) { mustWrite(t, s, "c-wake", "w"); s.mustCLI("branch", "stop", "c-wake") },
			act:   func(t *testing.T, s *server) { psqlWith(s, "app@c-wake", "SELECT 1") },
			after: func(t *testing.T, s *server) { mustRead(t, s, "c-wake", "w") }},
		{name: "crash after stopping", rule: "catalog.stopping@c-stop=1*crash",
			setup: func(t *testing.T, s *server) { mustWrite(t, s, "c-stop", "s") },
			act:   func(t *testing.T, s *server) { s.cli("branch", "stop", "c-stop") },
			after: func(t *testing.T, s *server) { mustRead(t, s, "c-stop", "s") }},
		{name: "crash after resetting", rule: "catalog.resetting@c-reset=1*crash",
			setup: func(t *testing.T, s *server) { mustWrite(t, s, "c-reset", "r") },
			act:   func(t *testing.T, s *server) { s.cli("branch", "reset", "c-reset") },
			after: func(t *testing.T, s *server) { mustRead(t, s, "c-reset", "seed") }},
		{name: "crash after destroying", rule: "catalog.destroying@c-destroy=1*crash",
			setup: func(t *testing.T, s *server) { mustWrite(t, s, "c-destroy", "d") },
			act:   func(t *testing.T, s *server) { s.cli("branch", "destroy", "c-destroy") },
			after: func(t *testing.T, s *server) {
				if b, ok := s.branches()["c-destroy"]; ok {
					t.Errorf("branch whose destroy was interrupted survived: %+v", b)
				}
			}},
		{name: "crash during fork", rule: "fork@c-forkp=1*crash",
			setup: func(t *testing.T, s *server) {
				mustWrite(t, s, "c-forkp", "p")
				s.connect(t, "app@c-forkp")
				layersBefore = countEntries(filepath.Join(s.state, "layers"))
			},
			act: func(t *testing.T, s *server) {
				psqlWith(s, "app@c-forkc", "SELECT 1", "options='-c pgbranch.from=c-forkp'")
			},
			after: func(t *testing.T, s *server) {
				if n := countEntries(filepath.Join(s.state, "layers")); n != layersBefore {
					t.Errorf("%d fork layers after the interrupted fork, %d before", n, layersBefore)
				}
				if out, err := psqlWith(s, "app@c-forkc", "SELECT v FROM t WHERE id = 1", "options='-c pgbranch.from=c-forkp'"); err != nil || out != "p" {
					t.Fatalf("fork after the crash: %q %v\n%s", out, err, s.logs())
				}
			}},
		{name: "crash during roles refresh", rule: "roles@c-roles=1*crash",
			act:   func(t *testing.T, s *server) { psqlWith(s, "app@c-roles", "SELECT 1") },
			after: func(t *testing.T, s *server) { mustRead(t, s, "c-roles", "seed") }},
	}
}

// TestFaultMatrix meets every fault on one server and one seed: after each, the
// catalog, mounts and processes agree, no branch is lost or duplicated, the seed
// is unchanged, and a session on another branch keeps working (crashes end it: its
// data is checked after the restart instead).
func TestFaultMatrix(t *testing.T) {
	live, crashes := liveFaults(), crashFaults()
	var rules []string
	for _, c := range live {
		rules = append(rules, c.rule)
	}
	t.Setenv(failpointsEnv, strings.Join(append(rules, crashes[0].rule), ";"))
	s := startServer(t, newStateDir(t), "--reap-interval", "200ms")
	s.seedSQL("app", lifecycleSQL)
	seedSum := seedChecksum(t, seedDir(s, "app"))
	ctx := context.Background()
	keep := s.connect(t, "app@keep")
	row := 10000
	checkKeep := func(t *testing.T, c *pgx.Conn) {
		t.Helper()
		row++
		if _, err := c.Exec(ctx, "INSERT INTO t VALUES ($1, 'keep')", row); err != nil {
			t.Fatalf("the other branch's session broke: %v", err)
		}
	}
	for _, c := range live {
		if !t.Run(c.name, func(t *testing.T) {
			if c.setup != nil {
				c.setup(t, s)
			}
			c.act(t, s)
			c.after(t, s)
			checkAgree(t, s)
			checkKeep(t, keep)
			if sum := seedChecksum(t, seedDir(s, "app")); sum != seedSum {
				t.Fatal("the seed changed")
			}
		}) {
			return
		}
	}
	// Each crash case runs on a serve started with its rule; the next start repairs it.
	for i, c := range crashes {
		if !t.Run(c.name, func(t *testing.T) {
			if c.setup != nil {
				c.setup(t, s)
			}
			c.act(t, s)
			waitExit(t, s)
			next := ""
			if i+1 < len(crashes) {
				next = crashes[i+1].rule
			}
			os.Setenv(failpointsEnv, next)
			s.start()
			checkAgree(t, s)
			c.after(t, s)
			checkAgree(t, s)
			if sum := seedChecksum(t, seedDir(s, "app")); sum != seedSum {
				t.Fatal("the seed changed")
			}
		}) {
			return
		}
	}
	keep2 := s.connect(t, "app@keep")
	var n int
	if err := keep2.QueryRow(ctx, "SELECT count(*) FROM t WHERE v = 'keep'").Scan(&n); err != nil || n != row-10000 {
		t.Errorf("the other branch's rows after every fault: %d (%v), want %d", n, err, row-10000)
	}
	// Nothing lost, nothing duplicated: every branch the cases made, except the two
	// they destroyed, and the bystander's.
	want := []string{"keep", "k-create", "k-wake", "k-stop", "k-reset", "k-forkp", "k-forkc", "k-roles",
		"e-mount", "e-pgctl", "e-unmount", "e-usage", "e-wake",
		"c-create", "c-run", "c-wake", "c-stop", "c-reset", "c-forkp", "c-forkc", "c-roles"}
	var got []string
	for _, b := range branchList(t, s) {
		got = append(got, b.Name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("branches at the end:\n%v\nwant\n%v", got, want)
	}
	s.stop()
}

func countEntries(dir string) int {
	entries, _ := os.ReadDir(dir)
	return len(entries)
}

package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPgbranchtestSuite runs the pgbranchtest suite (30 parallel tests in two
// packages, one go test run) against a real server, then a deliberately failing
// test, and checks what it leaves behind.
func TestPgbranchtestSuite(t *testing.T) {
	// Its own server and state directory: it runs beside the others like it.
	t.Parallel()
	admin := freeAddr(t)
	const token = "suite-token-0123456789abcdef"
	s := startServer(t, newStateDir(t), "--admin-listen", admin, "--admin-token", token)
	s.seedSQL("app", "SELECT 1;")
	runs := filepath.Join(t.TempDir(), "runs")
	goTest := func(pkgs ...string) (string, error) {
		cmd := exec.Command("go", append([]string{"test", "-count=1", "-p", "2"}, pkgs...)...)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "PGBRANCH_URL=postgres://postgres@"+s.addr+"/app?sslmode=disable",
			"PGBRANCH_ADMIN_URL=http://"+admin, "PGBRANCH_ADMIN_TOKEN="+token, "PGBRANCHTEST_RUNS="+runs)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := goTest("./pgbranchtest/testdata/suite/a", "./pgbranchtest/testdata/suite/b")
	if err != nil {
		t.Fatalf("suite: %v\n%s\nserver log:\n%s", err, out, s.logs())
	}
	migrations := func() int {
		b, _ := os.ReadFile(runs)
		return strings.Count(string(b), "\n")
	}
	if n := migrations(); n != 1 {
		t.Errorf("migrations ran %d times, want once", n)
	}
	waitNoBranches := func() map[string]branchInfo {
		deadline := time.Now().Add(30 * time.Second)
		for {
			left := s.branches()
			if len(left) == 0 || time.Now().After(deadline) {
				return left
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if left := waitNoBranches(); len(left) != 0 {
		t.Errorf("branches left after a passing suite: %v", left)
	}
	if got := s.mustCLI("source", "ls"); strings.Count(got, "pgbt-") != 1 {
		t.Errorf("want one template source:\n%s", got)
	}
	// The template has database app too, but takes no new branch by it alone.
	if out, err := s.psql(t, "app@after-template", "SELECT 1"); err != nil || out != "1" {
		t.Errorf("app@after-template beside the template source: %q %v", out, err)
	}
	eventually(t, 10*time.Second, "after-template destroyed once its session has ended", func() bool {
		_, err := s.cli("branch", "destroy", "after-template")
		return err == nil
	})

	// A failing test keeps its branch for an hour and logs how to reach it.
	out, err = goTest("./pgbranchtest/testdata/suite/fail")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("failing test: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`kept branch (testfails-[a-z0-9]{6}) of the failed test for 1h0m0s after its last session: (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no kept branch in the output:\n%s", out)
	}
	time.Sleep(2 * time.Second) // an ephemeral branch would be gone by now
	left := s.branches()
	if b, ok := left[m[1]]; len(left) != 1 || !ok || b.Ephemeral || b.TTL != "1h0m0s" {
		t.Fatalf("after the failing test: %+v", left)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, m[2])
	if err != nil {
		t.Fatalf("logged URL %s: %v", m[2], err)
	}
	var emails string
	err = conn.QueryRow(ctx, "SELECT string_agg(email, ',' ORDER BY id) FROM users").Scan(&emails)
	conn.Close(ctx)
	if err != nil || emails != "admin@example.com,left-for-debugging@example.com" {
		t.Errorf("kept branch holds %q (%v)", emails, err)
	}
	if n := migrations(); n != 1 {
		t.Errorf("migrations ran %d times over both runs, want once", n)
	}
	s.mustCLI("branch", "destroy", m[1])

	// After a refresh of the source the migrations run again, on the new seed.
	s.mustCLI("source", "refresh", "app")
	if out, err := goTest("./pgbranchtest/testdata/suite/a"); err != nil {
		t.Fatalf("suite after a refresh: %v\n%s", err, out)
	}
	if n := migrations(); n != 2 {
		t.Errorf("migrations ran %d times after a refresh of the source, want twice in all", n)
	}
	// The first generation's template, which no branch uses, went once the
	// second's was made.
	if got := s.mustCLI("source", "ls"); strings.Count(got, "pgbt-") != 1 || !strings.Contains(got, "-g2 ") {
		t.Errorf("want only the template of generation 2:\n%s", got)
	}

	// A migration that fails fails each test waiting for it with its own error (each
	// in turn migrates again), none by waiting out its timeout.
	out, err = goTest("./pgbranchtest/testdata/suite/badmig")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || strings.Count(out, "division by zero") != 4 ||
		strings.Contains(out, "waiting for template") {
		t.Fatalf("failing migration: %v\n%s", err, out)
	}
}

// TestPgbranchtestDiedMigration: a test binary killed while it migrates (Ctrl-C,
// go test's -timeout) does not hold up the next run: its migration branch goes with
// its session, and the next run migrates at once instead of waiting for it until
// its own timeout.
func TestPgbranchtestDiedMigration(t *testing.T) {
	t.Parallel()
	s := startServer(t, newStateDir(t))
	s.seedSQL("app", "SELECT 1;")
	dir := t.TempDir()
	bin := filepath.Join(dir, "diedmig.test")
	build := exec.Command("go", "test", "-c", "-o", bin, "./pgbranchtest/testdata/suite/diedmig")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	env := append(os.Environ(), "PGBRANCH_URL=postgres://postgres@"+s.addr+"/app?sslmode=disable", "PGBRANCH_STATE_DIR="+s.state)
	hang := filepath.Join(dir, "migrating")
	first := exec.Command(bin, "-test.v")
	first.Env = append(env, "PGBRANCHTEST_HANG="+hang)
	var firstOut strings.Builder
	first.Stdout, first.Stderr = &firstOut, &firstOut
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the first binary migrating", func() bool {
		_, err := os.Stat(hang)
		return err == nil
	})
	first.Process.Kill()
	first.Wait()

	start := time.Now()
	second := exec.Command(bin, "-test.v")
	second.Env = env
	out, err := second.CombinedOutput()
	if err != nil {
		t.Fatalf("the run after a killed one: %v\n%s\nkilled run:\n%s", err, out, firstOut.String())
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the run after a killed one took %s: it waited for the dead binary's migration", took)
	}
}

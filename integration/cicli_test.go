package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cliCode runs a CLI subcommand and returns its stdout and exit code.
func (s *server) cliCode(args ...string) (string, string, int) {
	cmd := exec.Command(binPath, append([]string{"--state-dir", s.state}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.String(), stderr.String(), ee.ExitCode()
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return stdout.String(), stderr.String(), 0
}

// createResult is what branch create --output json prints.
type createResult struct {
	Name, Source, Database, Host, User, URL, Libpq, JDBC string
	Port                                                 int
	Created                                              bool
}

// TestCICommands drives the commands a CI job uses, over the TCP admin listener as
// a remote job would, and checks their output and exit codes.
func TestCICommands(t *testing.T) {
	// Its own server and state directory: it runs beside the others like it.
	t.Parallel()
	admin := freeAddr(t)
	const token = "ci-token-0123456789abcdef"
	s := startServer(t, newStateDir(t), "--admin-listen", admin, "--admin-token", token)
	s.seedSQL("app", "CREATE TABLE t (i int); INSERT INTO t VALUES (1);")
	remote := []string{"--admin-url", "http://" + admin, "--admin-token", token}
	run := func(want int, args ...string) string {
		t.Helper()
		out, errOut, code := s.cliCode(append(append([]string{}, remote...), args...)...)
		if code != want {
			t.Fatalf("pgbranchproxy %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out
	}
	var res createResult
	if err := json.Unmarshal([]byte(run(0, "branch", "create", "pr-1", "--if-not-exists", "--ttl", "72h", "--output", "json")), &res); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(s.addr)
	wantURL := "postgres://postgres@" + s.addr + "/app%40pr-1"
	if !res.Created || res.Name != "pr-1" || res.Source != "app" || res.Database != "app" || res.URL != wantURL {
		t.Fatalf("first create: %+v", res)
	}
	if res.Libpq != "host="+host+" port="+port+" user=postgres dbname=app@pr-1" || res.JDBC != "jdbc:postgresql://"+s.addr+"/app%40pr-1?user=postgres" {
		t.Errorf("libpq %q, jdbc %q", res.Libpq, res.JDBC)
	}
	if b := s.branches()["pr-1"]; b.TTL != "72h0m0s" {
		t.Errorf("ttl %q", b.TTL)
	}
	json.Unmarshal([]byte(run(0, "branch", "create", "pr-1", "--if-not-exists", "--output", "json")), &res)
	if res.Created || res.URL != wantURL {
		t.Errorf("second create with --if-not-exists: %+v", res)
	}
	run(4, "branch", "create", "pr-1")
	env := run(0, "branch", "create", "pr-1", "--if-not-exists", "--output", "env")
	for _, l := range []string{"PGBRANCH_BRANCH=pr-1", "PGBRANCH_CREATED=false", "PGHOST=" + host, "PGPORT=" + port, "PGUSER=postgres", "PGDATABASE=app@pr-1", "DATABASE_URL=" + wantURL} {
		if !strings.Contains(env, l+"\n") {
			t.Errorf("--output env lacks %s:\n%s", l, env)
		}
	}

	// Every form of branch url reaches the branch.
	if got := strings.TrimSpace(run(0, "branch", "url", "pr-1")); got != wantURL {
		t.Errorf("branch url: %q", got)
	}
	libpq := strings.TrimSpace(run(0, "branch", "url", "pr-1", "--format", "libpq"))
	if libpq != res.Libpq {
		t.Errorf("branch url --format libpq: %q", libpq)
	}
	if got := strings.TrimSpace(run(0, "branch", "url", "pr-1", "--format", "jdbc")); got != res.JDBC {
		t.Errorf("branch url --format jdbc: %q", got)
	}
	for _, conn := range []string{wantURL + "?sslmode=disable", libpq + " sslmode=disable"} {
		out, err := exec.Command("psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", conn, "-c", "INSERT INTO t VALUES (2) RETURNING current_database()").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "app\n") {
			t.Fatalf("psql %q: %v\n%s", conn, err, out)
		}
	}
	run(2, "branch", "url", "pr-1", "--format", "odbc")

	// Reset throws the writes away; destroy is idempotent with --if-exists.
	run(0, "branch", "reset", "pr-1")
	if out, err := s.psql(t, "app@pr-1", "SELECT count(*) FROM t"); err != nil || out != "1" {
		t.Errorf("after reset: %q %v", out, err)
	}
	run(0, "branch", "destroy", "pr-1")
	run(3, "branch", "destroy", "pr-1")
	run(0, "branch", "destroy", "pr-1", "--if-exists")
	run(3, "branch", "destroy", "pr-1", "--if-exists", "--source", "nosuch")
	run(3, "branch", "reset", "pr-1")
	run(2, "branch", "create")
	run(2, "branch", "create", "x", "--bogus")
	run(2, "branch", "create", "x", "--output", "yaml")
	// Names the server would refuse, and values a line-based output cannot carry,
	// are usage errors, refused before anything is created.
	run(2, "branch", "create", "PR 1", "--output", "env")
	run(2, "branch", "url", "pr-1\nLD_PRELOAD=/tmp/x.so", "--format", "env")
	run(2, "branch", "create", "pr-1", "--output", "env", "--password", "x\nBASH_ENV=/tmp/evil")
	run(3, "branch", "reset", "pr-1")
	// --ttl takes what pgbranch.ttl takes, days too, and never a negative one.
	run(2, "branch", "create", "pr-2", "--ttl", "-1h")
	run(2, "branch", "create", "pr-2", "--ttl", "3 days")
	run(0, "branch", "create", "pr-2", "--ttl", "3d")
	if ls := run(0, "branch", "ls", "--json"); !strings.Contains(ls, `"ttl": "72h0m0s"`) {
		t.Errorf("branch created with --ttl 3d: %s", ls)
	}
	run(0, "branch", "destroy", "pr-2")

	// A token of role ci may not read the server's info or sources: the flags fill in.
	ci := strings.TrimSpace(s.mustCLI("token", "create", "github", "--role", "ci", "--prefix", "pr-"))
	out, errOut, code := s.cliCode("--admin-url", "http://"+admin, "--admin-token", ci, "branch", "create", "pr-9", "--if-not-exists", "--port", port, "--output", "json")
	json.Unmarshal([]byte(out), &res)
	if code != 0 || !res.Created || res.URL != "postgres://postgres@"+s.addr+"/app%40pr-9" {
		t.Errorf("create with a ci token: exit %d %+v %s", code, res, errOut)
	}
	run(0, "branch", "destroy", "pr-9")

	// A wrong token is an error, not "not found".
	if _, errOut, code := s.cliCode("--admin-url", "http://"+admin, "--admin-token", "wrong-token-0123456789", "branch", "destroy", "pr-1"); code != 1 || !strings.Contains(errOut, "token") {
		t.Errorf("wrong token: exit %d: %s", code, errOut)
	}
	if _, ok := s.branches()["pr-1"]; ok {
		t.Error("pr-1 still listed")
	}

	// With a second source of the same database the lines carry PGOPTIONS, and a
	// shell that sources them reaches the branch of the source named.
	other := filepath.Join(t.TempDir(), "other.sql")
	os.WriteFile(other, []byte("CREATE TABLE other (i int);\n"), 0o644)
	s.mustCLI("source", "add", "app2", "--from-sql", other, "--database", "app")
	env = run(0, "branch", "create", "pr-3", "--source", "app", "--output", "env")
	if !strings.Contains(env, "PGOPTIONS=-cpgbranch.source=app\n") {
		t.Fatalf("--output env with two sources of app:\n%s", env)
	}
	f := filepath.Join(t.TempDir(), "branch.env")
	os.WriteFile(f, []byte(env), 0o600)
	sourced, err := exec.Command("bash", "-c", `set -ae; . "$1"; psql -X -At -c "SELECT count(*) FROM t"`, "bash", f).CombinedOutput()
	if err != nil || strings.TrimSpace(string(sourced)) != "1" {
		t.Errorf("psql after sourcing --output env: %v\n%s", err, sourced)
	}
	run(0, "branch", "destroy", "pr-3", "--source", "app")
}

// TestSourceFromBranch seeds a source from a running branch with a session open on
// it, branches from that source, and refreshes it from the branch's later state.
func TestSourceFromBranch(t *testing.T) {
	// Its own server and state directory: it runs beside the others like it.
	t.Parallel()
	s := startServer(t, newStateDir(t))
	s.seedSQL("app", "CREATE TABLE t (i int); INSERT INTO t VALUES (1);")
	ctx := context.Background()
	mig := s.connect(t, "app@mig")
	for _, q := range []string{"CREATE TABLE m (v text PRIMARY KEY)", "INSERT INTO m VALUES ('one')", "BEGIN", "INSERT INTO t VALUES (99)"} {
		if _, err := mig.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// The copy is taken online: a session with an open transaction stays, and what
	// that transaction has not committed is not in the seed.
	s.mustCLI("source", "add", "tpl", "--from-branch", "app/mig")
	if _, err := mig.Exec(ctx, "COMMIT"); err != nil {
		t.Fatalf("session on the branch after the copy: %v", err)
	}
	count := func(db, sql string) string {
		t.Helper()
		c := s.connect(t, db, "options='-c pgbranch.source=tpl'")
		defer c.Close(ctx)
		var out string
		if err := c.QueryRow(ctx, sql).Scan(&out); err != nil {
			t.Fatalf("%s: %s: %v", db, sql, err)
		}
		return out
	}
	if got := count("app@b1", "SELECT string_agg(v, ',' ORDER BY v) || '/' || (SELECT count(*) FROM t) FROM m"); got != "one/1" {
		t.Errorf("branch of the new source sees %q, want one/1", got)
	}
	var srcs []struct {
		Name, Kind string
		Generation int
		Database   string
	}
	json.Unmarshal([]byte(s.mustCLI("source", "ls", "--json")), &srcs)
	if len(srcs) != 2 || srcs[1].Name != "tpl" || srcs[1].Kind != "branch" || srcs[1].Generation != 1 || srcs[1].Database != "app" {
		t.Errorf("sources: %+v", srcs)
	}

	// Refresh copies the branch as it is now; the older branch keeps its generation.
	if _, err := mig.Exec(ctx, "INSERT INTO m VALUES ('two')"); err != nil {
		t.Fatal(err)
	}
	s.mustCLI("source", "refresh", "tpl")
	if got := count("app@b2", "SELECT string_agg(v, ',' ORDER BY v) FROM m"); got != "one,two" {
		t.Errorf("after refresh: %q", got)
	}
	if got := count("app@b1", "SELECT string_agg(v, ',' ORDER BY v) FROM m"); got != "one" {
		t.Errorf("older branch after refresh: %q", got)
	}
	if _, _, code := s.cliCode("source", "add", "x", "--from-branch", "app/nope"); code != 3 {
		t.Errorf("missing branch: exit %d, want 3", code)
	}
	if _, ok := s.branches()["nope"]; ok {
		t.Error("source add --from-branch created the branch it was to copy")
	}
	mig.Close(ctx)
}

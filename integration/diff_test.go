package integration

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
)

// diffCLI runs branch diff and returns its output and exit status.
func diffCLI(t *testing.T, s *server, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"--state-dir", s.state, "branch", "diff"}, args...)...)
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatal(err)
	return "", -1
}

// TestBranchDiff: branch diff shows schema changes as a unified diff with diff's exit
// statuses, and --data the tables whose row counts changed.
func TestBranchDiff(t *testing.T) {
	s := startServer(t, newStateDir(t))
	s.seedSQL("app", `CREATE TABLE users (id int PRIMARY KEY, name text);
INSERT INTO users SELECT g, 'u' || g FROM generate_series(1, 1000) g;
CREATE TABLE audit (id int); INSERT INTO audit VALUES (1);`)
	mustPSQL := func(db, sql string) {
		t.Helper()
		if out, err := s.psql(t, db, sql); err != nil {
			t.Fatalf("%s: %v\n%s", sql, err, out)
		}
	}
	mustPSQL("app@feature", "SELECT 1")

	out, code := diffCLI(t, s, "feature")
	if code != 0 || out != "" {
		t.Fatalf("unchanged branch: exit %d, output %q", code, out)
	}

	for _, step := range []struct{ sql, want string }{
		{"ALTER TABLE users ADD COLUMN email text", "+    email text"},
		{"CREATE INDEX users_email ON users (email)", "+CREATE INDEX users_email ON public.users USING btree (email);"},
		{"DROP TABLE audit", "-CREATE TABLE public.audit ("},
	} {
		mustPSQL("app@feature", step.sql)
		out, code := diffCLI(t, s, "feature")
		if code != 1 || !strings.Contains(out, step.want) || !strings.Contains(out, "--- seed/app\n+++ feature/app\n") {
			t.Fatalf("after %s: exit %d, output:\n%s", step.sql, code, out)
		}
		t.Logf("after %s:\n%s", step.sql, out)
	}

	// Against another branch: an untouched one has the seed's schema.
	mustPSQL("app@other", "SELECT 1")
	out, code = diffCLI(t, s, "feature", "--against", "other")
	if code != 1 || !strings.Contains(out, "--- other/app\n+++ feature/app\n") || !strings.Contains(out, "+    email text") {
		t.Fatalf("--against other: exit %d, output:\n%s", code, out)
	}
	if out, code = diffCLI(t, s, "other", "--against", "seed"); code != 0 || out != "" {
		t.Fatalf("untouched branch against the seed: exit %d, output %q", code, out)
	}

	// --data: row counts and the bytes the branch owns of each table.
	mustPSQL("app@other", "INSERT INTO users SELECT g, 'n' || g FROM generate_series(1001, 1500) g; CHECKPOINT")
	out, code = diffCLI(t, s, "other", "--data", "--json")
	var res branches.DiffResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 || res.Schema != "" {
		t.Fatalf("--data: exit %d, %v, output:\n%s", code, err, out)
	}
	var users *struct{ base, rows, owned int64 }
	for _, d := range res.Tables {
		if d.Database == "app" && d.Table == "public.users" {
			users = &struct{ base, rows, owned int64 }{d.BaseRows, d.Rows, d.Owned}
			if d.Status != "changed" {
				t.Errorf("users status %q", d.Status)
			}
		} else if d.Status != "same" || d.Bytes != d.BaseBytes {
			// Untouched: the seed's sizes are taken once it has settled (VACUUM
			// makes a visibility map), as the branch sees them.
			t.Errorf("table %s/%s: %s, %d bytes, seed %d", d.Database, d.Table, d.Status, d.Bytes, d.BaseBytes)
		}
	}
	if users == nil || users.base != 1000 || users.rows != 1500 || users.owned <= 0 {
		t.Fatalf("users in --data: %+v\n%s", users, out)
	}
	if out, code = diffCLI(t, s, "other", "--data"); code != 1 || !strings.Contains(out, "public.users") {
		t.Fatalf("--data table: exit %d\n%s", code, out)
	}

	if _, code = diffCLI(t, s, "nosuch"); code != 2 {
		t.Errorf("missing branch: exit %d, want 2", code)
	}
	s.mustCLI("branch", "destroy", "feature")
	s.mustCLI("branch", "destroy", "other")
}

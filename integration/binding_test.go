package integration

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
)

// serveRefused runs serve on state with extra flags, which must exit before it
// serves, and returns what it said.
func serveRefused(t *testing.T, ctx context.Context, state string, extra ...string) string {
	t.Helper()
	args := append([]string{"--state-dir", state, "serve", "--listen", freeAddr(t), "--shim", shimPath, "--auth", "trust"}, extra...)
	args = append(args, runtimeArgs(nil)...)
	out, err := exec.CommandContext(ctx, binPath, args...).CombinedOutput()
	if err == nil {
		t.Fatalf("serve %s started:\n%s", strings.Join(extra, " "), out)
	}
	return string(out)
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestCatalogBoundToStateDir: a state directory serves only with its own catalog.
// Started with an empty Postgres catalog or a new SQLite file (a mistyped
// --catalog), serve refuses before it reconciles, and every branch directory is
// kept; with its catalog again, the branches serve their data. A state directory
// and catalog from before the binding existed are bound at their next start.
func TestCatalogBoundToStateDir(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cat, url := startCatalog(t, ctx)
	state := newStateDir(t)
	s := startServer(t, state, "--catalog", url)
	s.seedSQL("app", lifecycleSQL)
	mustWrite(t, s, "kept", "before")
	mustWrite(t, s, "other", "two")
	s.stop()
	before := dirNames(t, filepath.Join(state, "branches"))
	if len(before) != 2 {
		t.Fatalf("branch directories %v, want 2", before)
	}
	id, err := branches.ReadStateID(state)
	if err != nil || id == "" {
		t.Fatalf("state id after the first serve: %q %v", id, err)
	}

	empty, err := cat.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{empty, filepath.Join(t.TempDir(), "typo.db")} {
		out := serveRefused(t, ctx, state, "--catalog", other)
		if !strings.Contains(out, "does not belong to this state directory") || !strings.Contains(out, "is empty") ||
			!strings.Contains(out, state) || !strings.Contains(out, "catalog migrate") {
			t.Errorf("serve with the empty catalog %s said:\n%s\nwant a refusal naming the catalog, the state directory and catalog migrate", other, out)
		}
		if got := dirNames(t, filepath.Join(state, "branches")); strings.Join(got, ",") != strings.Join(before, ",") {
			t.Fatalf("branch directories after serve with %s: %v, want %v", other, got, before)
		}
	}

	// A catalog bound to another state directory is refused too, naming both ids.
	elsewhere := newStateDir(t)
	s2 := startServer(t, elsewhere, "--catalog", empty)
	s2.stop()
	out := serveRefused(t, ctx, state, "--catalog", empty)
	otherID, _ := branches.ReadStateID(elsewhere)
	if !strings.Contains(out, id) || !strings.Contains(out, otherID) {
		t.Errorf("serve with another state directory's catalog said:\n%s\nwant both ids, %s and %s", out, id, otherID)
	}

	// Before the binding existed: no id on either side, a catalog with rows.
	if err := os.Remove(branches.StateIDFile(state)); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "DELETE FROM binding"); err != nil {
		t.Fatal(err)
	}

	s = startServer(t, state, "--catalog", url)
	for branch, want := range map[string]string{"kept": "before", "other": "two"} {
		if got, err := s.psql(t, "app@"+branch, "SELECT v FROM t WHERE id = 1"); err != nil || got != want {
			t.Fatalf("app@%s with its catalog again: %q %v, want %q\n%s", branch, got, err, want, s.logs())
		}
	}
	if adopted, err := branches.ReadStateID(state); err != nil || adopted == "" {
		t.Fatalf("state id after serving a state directory from before the id: %q %v", adopted, err)
	}
}

// TestCatalogMigrateGuards: catalog migrate takes what serve takes, so a serve
// running on either end, or on the state directory, is refused; once it stops, the
// copy carries the state directory's id, and the state directory serves with it.
func TestCatalogMigrateGuards(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, url := startCatalog(t, ctx)
	state := newStateDir(t)
	s := startServer(t, state, "--catalog", url)
	s.seedSQL("app", lifecycleSQL)
	mustWrite(t, s, "kept", "moved")
	copyDB := filepath.Join(t.TempDir(), "copy.db")

	other := filepath.Join(t.TempDir(), "other.db")
	inState := filepath.Join(state, "old.db")
	for _, f := range []string{other, inState} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"from the serve's catalog", url, copyDB, "catalog is in use by another server"},
		{"into the serve's catalog", other, url, "catalog is in use by another server"},
		{"from a file in the serve's state directory", inState, copyDB, "a server is running on " + state},
	} {
		out, err := s.cli("catalog", "migrate", "--from", tc.from, "--to", tc.to, "--force")
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("migrate %s under a running serve: %v\n%s\nwant %q", tc.name, err, out, tc.want)
		}
	}
	if got, err := s.psql(t, "app@kept", "SELECT v FROM t WHERE id = 1"); err != nil || got != "moved" {
		t.Fatalf("the serve after the refused migrations: %q %v", got, err)
	}
	s.stop()

	s.mustCLI("catalog", "migrate", "--from", url, "--to", copyDB)
	s = startServer(t, state, "--catalog", copyDB)
	if got, err := s.psql(t, "app@kept", "SELECT v FROM t WHERE id = 1"); err != nil || got != "moved" {
		t.Fatalf("app@kept on the migrated catalog: %q %v\n%s", got, err, s.logs())
	}

	// A branch the old catalog never saw; then serve on the old catalog again (an
	// old unit file): refused, and nothing is removed.
	mustWrite(t, s, "late", "new")
	s.stop()
	before := dirNames(t, filepath.Join(state, "branches"))
	if out := serveRefused(t, ctx, state, "--catalog", url); !strings.Contains(out, "was copied to another by catalog migrate") {
		t.Errorf("serve on the catalog migrated from: %s", out)
	}
	if after := dirNames(t, filepath.Join(state, "branches")); !slices.Equal(before, after) {
		t.Fatalf("branch directories %v after serve on the old catalog, were %v", after, before)
	}
	s = startServer(t, state, "--catalog", copyDB)
	if got, err := s.psql(t, "app@late", "SELECT v FROM t WHERE id = 1"); err != nil || got != "new" {
		t.Fatalf("app@late on the migrated catalog: %q %v\n%s", got, err, s.logs())
	}
}

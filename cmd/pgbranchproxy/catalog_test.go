package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// runRoot runs the command line args and returns its output, exit code and error.
func runRoot(args ...string) (string, int, error) {
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), exitCode(err), err
}

// catalog migrate copies the state dir's catalog by default, refuses a
// destination with rows unless --force, and refuses a missing or identical source.
// (Copy itself runs against SQLite and Postgres in package catalog.)
func TestCatalogMigrate(t *testing.T) {
	ctx := context.Background()
	state, other := t.TempDir(), t.TempDir()
	src, err := catalog.Open(filepath.Join(state, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := src.AddSource(ctx, catalog.Source{Name: "app", Kind: "empty", Warm: -1}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.InsertBranch(ctx, catalog.Branch{Source: "app", Name: "main", State: catalog.Stopped}, "create"); err != nil {
		t.Fatal(err)
	}
	src.Close()
	dst := filepath.Join(other, "copy.db")

	out, code, err := runRoot("--state-dir", state, "catalog", "migrate", "--to", dst)
	if err != nil || !strings.Contains(out, "copied 3 rows") || !strings.Contains(out, "1 branches") {
		t.Fatalf("migrate: %q, %v (exit %d)", out, err, code)
	}
	c, err := catalog.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Branches(ctx)
	c.Close()
	if err != nil || len(got) != 1 || got[0].Name != "main" || got[0].Source != "app" {
		t.Fatalf("branches in the copy: %+v, %v", got, err)
	}
	// The state directory, from before the state id, is bound to the copy, and the
	// catalog it was copied from is retired.
	id, err := branches.ReadStateID(state)
	if err != nil || id == "" {
		t.Fatalf("state id after migrate: %q, %v", id, err)
	}
	for dsn, want := range map[string]string{filepath.Join(state, "catalog.db"): catalog.RetiredPrefix + id, dst: id} {
		c, err := catalog.Open(dsn)
		if err != nil {
			t.Fatal(err)
		}
		bound, err := c.StateID(ctx)
		c.Close()
		if err != nil || bound != want {
			t.Errorf("%s is bound to %q (%v), want %q", dsn, bound, err, want)
		}
	}

	tests := []struct {
		name     string
		args     []string
		wantErr  string
		wantCode int
	}{
		{"again from the retired catalog", []string{"--to", dst, "--force"}, "migrated to another catalog already", exitError},
		{"destination with rows", []string{"--from", dst, "--to", filepath.Join(state, "catalog.db")}, "pass --force", exitError},
		{"back, forced", []string{"--from", dst, "--to", filepath.Join(state, "catalog.db"), "--force"}, "", exitOK},
		{"missing source", []string{"--from", filepath.Join(other, "none.db"), "--to", filepath.Join(other, "x.db")}, "no such file", exitError},
		{"same catalog", []string{"--from", dst, "--to", dst}, "same catalog", exitUsage},
		{"no destination", nil, `"to" not set`, exitError},
	}
	for _, tc := range tests {
		out, code, err := runRoot(append([]string{"--state-dir", state, "catalog", "migrate"}, tc.args...)...)
		if code != tc.wantCode || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: %q, %v (exit %d), want an error with %q and exit %d", tc.name, out, err, code, tc.wantErr, tc.wantCode)
		}
	}
	if _, err := os.Stat(filepath.Join(other, "none.db")); !os.IsNotExist(err) {
		t.Errorf("a missing source was created: %v", err)
	}

	// A server on the state dir (it holds the state directory's lock): its catalog
	// is not copied from under it.
	lock, err := branches.LockStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	out, code, err = runRoot("--state-dir", state, "catalog", "migrate", "--to", dst, "--force")
	if code != exitError || err == nil || !strings.Contains(err.Error(), "a server is running") ||
		!strings.Contains(err.Error(), "state directory is in use") {
		t.Errorf("migrate under a running server: %q, %v (exit %d)", out, err, code)
	}
}

package integration

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSecondServeRefused: a second serve on a state directory in use stops before it
// touches anything, and the first one's branches keep serving.
func TestSecondServeRefused(t *testing.T) {
	state := newStateDir(t)
	s := startServer(t, state)
	s.seedSQL("app", lifecycleSQL)
	mustWrite(t, s, "kept", "before")
	c := s.connect(t, "app@kept")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := []string{"--state-dir", state, "serve", "--listen", freeAddr(t), "--shim", shimPath, "--auth", "trust"}
	args = append(args, runtimeArgs(nil)...)
	out, err := exec.CommandContext(ctx, binPath, args...).CombinedOutput()
	if err == nil {
		t.Fatalf("a second serve on %s started:\n%s", state, out)
	}
	if !strings.Contains(string(out), "state directory is in use") || !strings.Contains(string(out), "pid") {
		t.Errorf("the second serve said:\n%s\nwant that the state directory is in use, and by which pid", out)
	}
	var v string
	if err := c.QueryRow(context.Background(), "SELECT v FROM t WHERE id = 1").Scan(&v); err != nil || v != "before" {
		t.Fatalf("the first serve's session after the second serve: %q %v", v, err)
	}
	if out, err := s.psql(t, "app@kept", "SELECT v FROM t WHERE id = 1"); err != nil || out != "before" {
		t.Fatalf("a new session on the first serve: %q %v", out, err)
	}
}

// TestCatalogOwnedByOneServe: a second serve, on a state directory of its own, that
// points at a Postgres catalog in use stops before it reconciles anything.
func TestCatalogOwnedByOneServe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, url := startCatalog(t, ctx)
	s := startServer(t, newStateDir(t), "--catalog", url)
	s.seedSQL("app", lifecycleSQL)
	c := s.connect(t, "app@first")

	args := []string{"--state-dir", newStateDir(t), "serve", "--listen", freeAddr(t), "--shim", shimPath, "--auth", "trust", "--catalog", url}
	args = append(args, runtimeArgs(nil)...)
	out, err := exec.CommandContext(ctx, binPath, args...).CombinedOutput()
	if err == nil {
		t.Fatalf("a second serve on the same catalog started:\n%s", out)
	}
	if !strings.Contains(string(out), "catalog is in use by another server") {
		t.Errorf("the second serve said:\n%s\nwant that the catalog is in use", out)
	}
	var v string
	if err := c.QueryRow(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v); err != nil || v != "seed" {
		t.Fatalf("the first serve's session after the second serve: %q %v", v, err)
	}
	if got := s.branches(); len(got) != 1 {
		t.Fatalf("branches after the second serve: %+v", got)
	}
}

// TestCatalogOwnedAcrossRestart: a serve keeps its claim on a Postgres catalog
// through a restart of the catalog's server (killed with SIGKILL): once it has
// written again, a second serve on that catalog is still refused.
func TestCatalogOwnedAcrossRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cat, url := startCatalog(t, ctx)
	s := startServer(t, newStateDir(t), "--catalog", url)
	s.seedSQL("app", lifecycleSQL)
	mustWrite(t, s, "before", "one")

	if err := cat.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := cat.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	// A new branch is a catalog write: the serve holds its claim again by then.
	if out, err := s.psql(t, "app@after", "SELECT count(*) FROM t"); err != nil || out != "1000" {
		t.Fatalf("a new branch after the catalog's restart: %q %v\n%s", out, err, s.logs())
	}
	out := serveRefused(t, ctx, newStateDir(t), "--catalog", url)
	if !strings.Contains(out, "catalog is in use by another server") {
		t.Errorf("a second serve after the catalog's restart said:\n%s\nwant that the catalog is in use", out)
	}
	if got, err := s.psql(t, "app@before", "SELECT v FROM t WHERE id = 1"); err != nil || got != "one" {
		t.Fatalf("the first serve after the second was refused: %q %v", got, err)
	}
}

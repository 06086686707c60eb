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

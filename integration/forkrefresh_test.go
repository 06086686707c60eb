package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestForkAcrossRefresh: a branch made from a parent on an older seed generation
// than its source's newest (the source was refreshed after the parent was made)
// keeps that generation across a restart: the generation is not removed with the
// parent, the child still reads it, and branch diff compares with it.
func TestForkAcrossRefresh(t *testing.T) {
	s := startServer(t, newStateDir(t))
	sqlFile := filepath.Join(filepath.Dir(s.state), "app.sql")
	os.WriteFile(sqlFile, []byte("CREATE TABLE v AS SELECT 1 AS gen;"), 0o644)
	s.mustCLI("source", "add", "app", "--from-sql", sqlFile)
	if out, err := s.psql(t, "app@old", "CREATE TABLE mine (x int); SELECT gen FROM v"); err != nil || !strings.HasSuffix(out, "1") {
		t.Fatalf("%q %v", out, err)
	}
	os.WriteFile(sqlFile, []byte("CREATE TABLE v AS SELECT 2 AS gen; CREATE TABLE only_in_g2 (y int);"), 0o644)
	s.mustCLI("source", "refresh", "app")
	s.mustCLI("branch", "create", "kid", "--from", "old")

	s.stop()
	s.start()
	s.mustCLI("branch", "destroy", "old")
	if _, err := os.Stat(filepath.Join(s.state, "seeds", "app", "g1")); err != nil {
		t.Fatalf("generation 1 removed while a branch made from one of its branches uses it: %v", err)
	}
	if out, err := s.psql(t, "app@kid", "SELECT gen FROM v"); err != nil || out != "1" {
		t.Fatalf("the child after its parent went: %q %v", out, err)
	}
	out, _, code := s.cliCode("branch", "diff", "kid")
	if code != 1 || !strings.Contains(out, "+CREATE TABLE public.mine") || strings.Contains(out, "only_in_g2") {
		t.Errorf("branch diff kid (exit %d) does not compare with generation 1:\n%s", code, out)
	}
}

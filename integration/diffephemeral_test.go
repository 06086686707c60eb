package integration

import (
	"errors"
	"os/exec"
	"testing"
	"time"
)

// TestDiffKeepsUnusedEphemeral: an agent makes ephemeral candidates ahead of their
// first session (branch create --ephemeral, --from) and diffs them: a diff is the
// server's own work, not a session, so a candidate no session has used is kept
// (as after a fork of it), and goes when its first session ends.
func TestDiffKeepsUnusedEphemeral(t *testing.T) {
	s := startServer(t, newStateDir(t), "--reap-interval", "200ms")
	s.seedSQL("shop", shopSQL)
	if _, err := s.psql(t, "shop@base", "CREATE TABLE plan (step int)"); err != nil {
		t.Fatal(err)
	}
	s.mustCLI("branch", "create", "cand-a", "--ephemeral", "--from", "base")
	s.mustCLI("branch", "create", "cand-b", "--ephemeral", "--from", "base")
	// cand-a differs from the seed (exit 1), cand-b is base's copy (exit 0).
	for _, args := range [][]string{{"cand-a", "--data"}, {"base", "--against", "cand-b"}} {
		out, err := s.cli(append([]string{"branch", "diff"}, args...)...)
		var ee *exec.ExitError
		if err != nil && (!errors.As(err, &ee) || ee.ExitCode() != 1) {
			t.Fatalf("branch diff %v: %v\n%s", args, err, out)
		}
	}
	// A reaper pass destroys an ephemeral branch whose session has ended: once
	// it has destroyed this one, it has passed over the candidates.
	if _, err := s.psql(t, "shop@marker options=-cpgbranch.ephemeral=on", "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the marker's destroy", func() bool {
		_, ok := s.branches()["marker"]
		return !ok
	})
	all := s.branches()
	for _, name := range []string{"cand-a", "cand-b"} {
		if _, ok := all[name]; !ok {
			t.Errorf("a diff destroyed %s, an ephemeral branch no session had used\n%s", name, s.logs())
		}
	}
	if out, err := s.psql(t, "shop@cand-a", "SELECT count(*) FROM plan"); err != nil || out != "0" {
		t.Fatalf("cand-a's first session: %q %v", out, err)
	}
	eventually(t, 30*time.Second, "cand-a's destroy after its first session", func() bool {
		_, ok := s.branches()["cand-a"]
		return !ok
	})
}

package integration

import "testing"

// TestForkTreeListing: branch ls --json gives the tree of forks: each branch's
// parent, and whether that parent has been destroyed since, also once a new
// branch of the parent's name exists (an agent reusing a discarded step's name)
// and after a restart.
func TestForkTreeListing(t *testing.T) {
	s := startServer(t, newStateDir(t))
	s.seedSQL("shop", shopSQL)
	for _, q := range []struct{ name, from string }{{"step", ""}, {"step-a", "step"}, {"step-b", "step"}, {"step-a1", "step-a"}} {
		extra := ""
		if q.from != "" {
			extra = " options=-cpgbranch.from=" + q.from
		}
		if _, err := s.psql(t, "shop@"+q.name+extra, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		waitSessions(t, s, q.name)
	}
	s.mustCLI("branch", "destroy", "step")
	if _, err := s.psql(t, "shop@step", "SELECT 1"); err != nil { // the name again, from the seed
		t.Fatal(err)
	}
	waitSessions(t, s, "step")
	if _, err := s.psql(t, "shop@step-c options=-cpgbranch.from=step", "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		all := s.branches()
		for name, want := range map[string]struct {
			parent string
			gone   bool
		}{
			"step": {"", false}, "step-a": {"step", true}, "step-b": {"step", true},
			"step-a1": {"step-a", false}, "step-c": {"step", false},
		} {
			if b := all[name]; b.Parent != want.parent || b.ParentGone != want.gone {
				t.Errorf("%s: %s has parent %q, parent_gone %v; want %q, %v", when, name, b.Parent, b.ParentGone, want.parent, want.gone)
			}
		}
	}
	check("running")
	s.stop()
	s.start()
	check("after a restart")
}

package integration

import (
	"context"
	"testing"
)

const forkRolesSQL = `
CREATE TABLE t (id int PRIMARY KEY);
INSERT INTO t SELECT generate_series(1, 10);
CREATE ROLE admin LOGIN SUPERUSER PASSWORD 'admin-pw';
`

// TestForkSeesParentRoles: an agent creates a role, changes a password and creates
// a database on a running parent, then forks it at once: the fork's first login
// authenticates against the parent's roles as of the fork and may name the new
// database, whether the parent's session is still open or has just ended, though no
// reaper pass has read the parent's roles since. Under --auth trust too, where
// only the database is checked before the fork.
func TestForkSeesParentRoles(t *testing.T) {
	for _, auth := range []string{"scram-sha-256", "trust"} {
		t.Run(auth, func(t *testing.T) { forkSeesParentRoles(t, auth) })
	}
}

func forkSeesParentRoles(t *testing.T, auth string) {
	s := startServer(t, newStateDir(t), "--auth", auth, "--reap-interval", "1h", "--idle-stop", "1h")
	s.seedSQL("app", forkRolesSQL)
	ctx := context.Background()
	for _, open := range []bool{true, false} {
		parent, child, scratch := "held", "held-c1", "held-c2"
		if !open {
			parent, child, scratch = "left", "left-c1", "left-c2"
		}
		p := s.connect(t, "app@"+parent, "user=admin", "password=admin-pw")
		for _, sql := range []string{
			"CREATE ROLE agent_" + parent + " LOGIN PASSWORD 'agent-pw'",
			"GRANT SELECT ON t TO agent_" + parent,
			"CREATE DATABASE scratch_" + parent,
		} {
			if _, err := p.Exec(ctx, sql); err != nil {
				t.Fatal(err)
			}
		}
		if !open {
			p.Close(ctx)
			waitSessions(t, s, parent)
		}
		from := "options=-cpgbranch.from=" + parent
		if err := tryConnect(s.dsnAs("app@"+child, "agent_"+parent, "agent-pw", "sslmode=disable", from)); err != nil {
			t.Errorf("a role the parent (session open: %v) made, logging in to its fork: %v", open, err)
		}
		if _, err := s.connectErr("scratch_"+parent+"@"+scratch, "user=admin", "password=admin-pw", from); err != nil {
			t.Errorf("a database the parent (session open: %v) made, in its fork: %v", open, err)
		}
	}
	if t.Failed() {
		t.Logf("server log:\n%s", s.logs())
	}
}

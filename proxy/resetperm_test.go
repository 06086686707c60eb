package proxy_test

import (
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
)

// TestResetNeedsSuperuser: pgbranch.reset=on throws away what every role wrote
// in the branch, so a logged-in role that is not a superuser of the branch is
// refused (42501) before the branch is touched; a superuser, and a role of a set
// recorded before superusers were, may reset.
func TestResetNeedsSuperuser(t *testing.T) {
	t.Parallel()
	set := roles.Set{
		"alice": {Name: "alice", Password: scramVerifier(t, "alice-pw"), CanLogin: true, Superuser: new(false)},
		"root":  {Name: "root", Password: scramVerifier(t, "root-pw"), CanLogin: true, Superuser: new(true)},
		"old":   {Name: "old", Password: scramVerifier(t, "old-pw"), CanLogin: true}, // recorded before rolsuper was read
	}
	for _, tt := range []struct {
		user, password, options string
		refused                 bool
	}{
		{"alice", "alice-pw", "-c pgbranch.reset=on", true},
		{"alice", "alice-pw", "-c PGBRANCH.RESET=true", true},
		{"alice", "alice-pw", "", false},
		{"alice", "alice-pw", "-c pgbranch.reset=off", false},
		{"root", "root-pw", "-c pgbranch.reset=on", false},
		{"old", "old-pw", "-c pgbranch.reset=on", false},
	} {
		t.Run(tt.user+" "+tt.options, func(t *testing.T) {
			t.Parallel()
			cfg := defaultConfig()
			cfg.Auth = proxy.AuthSCRAM
			p, fb, fs := setup(t, cfg, scriptOK, nil, withRoles(set, nil))
			conn, err := p.connectAs(t, tt.user, tt.password, "dbname=app@feat options='"+tt.options+"'")
			recv(t, fb.lookups, "Roles")
			if !tt.refused {
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				query(t, conn)
				recv(t, fb.routes, "Acquire")
				return
			}
			pe := pgError(t, err)
			if pe.Code != "42501" || pe.Message != `permission denied to reset branch "feat"` || pe.Hint == "" {
				t.Errorf("got %s %q (hint %q), want 42501 permission denied to reset branch \"feat\"", pe.Code, pe.Message, pe.Hint)
			}
			checkRefusedBy(t, p, "42501")
			noneYet(t, fb.routes, "Acquire of a reset the role may not make")
			noneYet(t, fs.startups, "startup at the branch server")
		})
	}
}

package proxy_test

import (
	"fmt"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// TestAfterLoginError: an error that names sources (roles.AfterLogin) reaches only
// a client that logged in; one without a password, or with a role that does not
// exist, gets the same 28P01 as any failed login, and nothing is acquired.
func TestAfterLoginError(t *testing.T) {
	t.Parallel()
	named := &router.Error{Err: router.ErrUnknownSource, Message: `source "nope" does not exist`, Hint: `known sources: "app", "secret-crm"`}
	for _, tt := range []struct {
		user, password string
		wantCode       string
	}{
		{"alice", "alice-pw", "3D000"},
		{"alice", "wrong", "28P01"},
		{"nobody", "alice-pw", "28P01"},
	} {
		t.Run(tt.user+" "+tt.password, func(t *testing.T) {
			t.Parallel()
			cfg := defaultConfig()
			cfg.Auth = proxy.AuthSCRAM
			p, fb, _ := setup(t, cfg, scriptOK, nil, withRoles(nil, &roles.AfterLogin{Set: testRoles(t), Err: named}))
			_, err := p.connectAs(t, tt.user, tt.password, "dbname=app@feat")
			recv(t, fb.lookups, "Roles")
			pe := pgError(t, err)
			if pe.Code != tt.wantCode {
				t.Fatalf("got %s %q (hint %q), want %s", pe.Code, pe.Message, pe.Hint, tt.wantCode)
			}
			if tt.wantCode == "3D000" && (pe.Message != named.Message || pe.Hint != named.Hint) {
				t.Errorf("logged in: %q (hint %q), want the resolution error", pe.Message, pe.Hint)
			}
			if want := fmt.Sprintf("password authentication failed for user %q", tt.user); tt.wantCode == "28P01" && (pe.Message != want || pe.Hint != "") {
				t.Errorf("not logged in: %q (hint %q), want %q alone", pe.Message, pe.Hint, want)
			}
			noneYet(t, fb.routes, "Acquire")
		})
	}
}

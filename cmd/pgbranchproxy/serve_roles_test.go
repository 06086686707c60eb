package main

import (
	"strings"
	"testing"
)

// A node refuses what would make it serve the wrong clients or be unreachable:
// a SQLite catalog, an --auth of its own (fronts authenticate), a listen
// address no front can dial without --advertise, and a unix socket (which mutual
// TLS would not cover); a front needs a Postgres catalog
// too. Each is refused before anything starts.
func TestServeRoleFlags(t *testing.T) {
	pg := "postgres://catalog/db"
	for _, tc := range []struct {
		name string
		f    serveFlags
		want string
	}{
		{"node on SQLite", serveFlags{role: roleNode, catalog: "/tmp/c.db"}, "needs --catalog postgres"},
		{"node with --auth", serveFlags{role: roleNode, catalog: pg, authSet: true, auth: "md5"}, "does not authenticate"},
		{"node on every address", serveFlags{role: roleNode, catalog: pg, listen: "0.0.0.0:7432"}, "--advertise"},
		{"node on [::]", serveFlags{role: roleNode, catalog: pg, listen: "[::]:7432"}, "--advertise"},
		{"node with a unix socket", serveFlags{role: roleNode, catalog: pg, listen: "10.0.0.7:7432", unixSocketDir: "/run/x"}, "--unix-socket-dir is for"},
		{"front on SQLite", serveFlags{role: roleFront, catalog: ""}, "needs --catalog postgres"},
		{"unknown role", serveFlags{role: "both"}, "--role must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			err := serve(&globalFlags{stateDir: t.TempDir()}, &f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve = %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if !unspecifiedHost(":7432") || unspecifiedHost("10.0.0.7:7432") || unspecifiedHost("127.0.0.1:7432") {
		t.Fatal("unspecifiedHost")
	}
}

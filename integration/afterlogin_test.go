package integration

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestSourcesNamedAfterLogin: a route that names no one source (an unknown
// pgbranch.source, a database no source has, one that several have) is answered
// with the sources only to a client that logged in; without a password the client
// gets the 28P01 of any failed login, which names nothing, as Postgres tells no
// one which databases exist before they have logged in.
func TestSourcesNamedAfterLogin(t *testing.T) {
	s := startServer(t, newStateDir(t), "--auth", "scram-sha-256", "--max-failed-logins", "-1")
	s.seedSQL("app", rolesSQL)
	s.seedSQL("crmsecret", "CREATE TABLE c (x int);")
	for _, tc := range []struct{ db, options, want string }{
		{"app@x", "options=-cpgbranch.source=nope", `source "nope" does not exist`},
		{"nowhere@x", "", `database "nowhere" does not exist in any source`},
		{"postgres@x", "", `database "postgres" exists in several sources`},
	} {
		for _, who := range [][2]string{{"alice", "wrong"}, {"nobody", "alice-pw"}} {
			err := tryConnect(s.dsnAs(tc.db, who[0], who[1], "sslmode=disable", tc.options))
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "28P01" || strings.Contains(pe.Message+pe.Hint, "crmsecret") {
				t.Errorf("%s %s, %s with password %q: %v, want 28P01 naming no source", tc.db, tc.options, who[0], who[1], err)
			}
		}
		err := tryConnect(s.dsnAs(tc.db, "alice", "alice-pw", "sslmode=disable", tc.options))
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "3D000" || pe.Message != tc.want || !strings.Contains(pe.Hint, `"crmsecret"`) {
			t.Errorf("%s %s, logged in: %v (hint %q), want 3D000 %s naming the sources", tc.db, tc.options, err, hintOf(err), tc.want)
		}
	}
	if b := s.branches(); len(b) != 0 {
		t.Errorf("branches made: %v", b)
	}
}

func hintOf(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Hint
	}
	return ""
}

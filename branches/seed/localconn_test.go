package seed_test

import (
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/seed"
)

// TestLocalConn: a connection string that reaches a server of the host by a unix
// socket (a path, an abstract socket, or no host: libpq's default socket
// directory) or by a service of the host's file is told apart from one that
// reaches a server over the network, in both of libpq's forms.
func TestLocalConn(t *testing.T) {
	t.Parallel()
	for conn, want := range map[string]string{
		"host=/tmp/sock port=5433 user=postgres dbname=app": "/tmp/sock",
		"host='/var/run/postgresql' user=postgres":          "/var/run/postgresql",
		"host=@abstract user=postgres":                      "@abstract",
		"user=postgres dbname=app":                          "libpq's default unix socket directory",
		"host=db.example.com,/tmp/sock user=repl":           "/tmp/sock",
		"service=prod":                                                   "service prod of the host's service file",
		"postgres:///app":                                                "libpq's default unix socket directory",
		"postgresql://postgres@/app":                                     "libpq's default unix socket directory",
		"postgres://repl@%2Ftmp%2Fsock:5433/app":                         "/tmp/sock",
		"postgres://repl@db.example.com/app?host=/tmp/sock":              "/tmp/sock",
		"postgres://repl@db.example.com,%2Frun%2Fpg/app":                 "/run/pg",
		"postgres://repl@db.example.com/app?service=prod":                "service prod of the host's service file",
		"host=db.example.com user=repl":                                  "",
		"host=10.0.0.5 port=5432 user=repl password='a b'":               "",
		"host=/tmp/sock hostaddr=10.0.0.5 user=repl":                     "", // hostaddr: TCP to it
		"hostaddr=10.0.0.5 user=repl":                                    "",
		"postgres://repl:secret@db.example.com:5432/app?sslmode=require": "",
		"postgresql://repl@[::1]:5432/app":                               "",
		"postgres://repl@db1:5432,db2:5433/app":                          "",
		"postgres://repl@/app?hostaddr=10.0.0.5":                         "",
	} {
		got, local := seed.LocalConn(conn)
		if local != (want != "") || got != want {
			t.Errorf("LocalConn(%q) = %q, %v; want %q, %v", conn, got, local, want, want != "")
		}
	}
}

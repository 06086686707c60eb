package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestMissingDatabaseCreatesNothing: a typo in the database name gets 3D000 before
// any branch is created or woken, under trust and after a SCRAM login, from the seed
// and from a parent branch; a database created in a parent is found from its children.
func TestMissingDatabaseCreatesNothing(t *testing.T) {
	s := startServer(t, newStateDir(t), "--auth", "scram-sha-256", "--reap-interval", "200ms")
	s.seedSQL("demo", rolesSQL+"ALTER ROLE alice CREATEDB;")

	noBranch := func(t *testing.T, names ...string) {
		t.Helper()
		have := s.branches()
		for _, n := range names {
			if _, ok := have[n]; ok {
				t.Errorf("branch %q was created", n)
			}
		}
		if strings.Contains(s.logs(), "could not prepare") {
			t.Errorf("an internal error was logged:\n%s", s.logs())
		}
	}
	t.Run("FromSeed", func(t *testing.T) {
		err := tryConnect(s.dsnAs("nosuch@x", "alice", "alice-pw", "sslmode=disable"))
		if pgCode(err) != "3D000" || !strings.Contains(err.Error(), `database "nosuch" does not exist`) {
			t.Fatalf("nosuch@x: %v, want 3D000 database \"nosuch\" does not exist", err)
		}
		noBranch(t, "x")
		// A wrong password is still 28P01: the database is not revealed before login.
		if err := tryConnect(s.dsnAs("nosuch@y", "alice", "wrong", "sslmode=disable")); pgCode(err) != "28P01" {
			t.Fatalf("wrong password: %v, want 28P01", err)
		}
		noBranch(t, "y")
	})
	t.Run("FromParent", func(t *testing.T) {
		if err := tryConnect(s.dsnAs("demo@parent", "alice", "alice-pw", "sslmode=disable")); err != nil {
			t.Fatal(err)
		}
		err := tryConnect(s.dsnAs("nosuch@child", "alice", "alice-pw", "sslmode=disable", "options='-c pgbranch.from=parent'"))
		if pgCode(err) != "3D000" {
			t.Fatalf("nosuch@child from parent: %v, want 3D000", err)
		}
		noBranch(t, "child")
	})
	t.Run("DatabaseMadeInParent", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := pgx.Connect(ctx, s.dsnAs("demo@parent", "alice", "alice-pw", "sslmode=disable"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Exec(ctx, "CREATE DATABASE extra")
		c.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The reaper reads the parent's roles and databases after its use.
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := tryConnectDB(s.dsnAs("extra@child2", "alice", "alice-pw", "sslmode=disable", "options='-c pgbranch.from=parent'"))
			if err == nil {
				break
			}
			if pgCode(err) != "3D000" || time.Now().After(deadline) {
				t.Fatalf("extra@child2 from parent: %v\n%s", err, s.logs())
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err := tryConnectDB(s.dsnAs("extra@child3", "alice", "alice-pw", "sslmode=disable")); pgCode(err) != "3D000" {
			t.Fatalf("extra@child3 from the seed: %v, want 3D000", err)
		}
		noBranch(t, "child3")
	})
	t.Run("ExistingBranchAsksItsServer", func(t *testing.T) {
		// Branch "parent" exists: its own server answers (Postgres's 3D000, and the
		// stopped branch is woken for it, as any session would).
		err := tryConnect(s.dsnAs("nosuch@parent", "alice", "alice-pw", "sslmode=disable"))
		if pgCode(err) != "3D000" {
			t.Fatalf("nosuch@parent: %v, want 3D000", err)
		}
	})
}

// TestSourceNameWithUnderscore: source names accept '_' (they default to the
// database name) and still refuse '/', '..', uppercase and NUL.
func TestSourceNameWithUnderscore(t *testing.T) {
	s := startServer(t, newStateDir(t))
	s.seedSQL("my_app", "CREATE TABLE t (id int); INSERT INTO t VALUES (1);")
	if out, err := s.psql(t, "my_app@b1", "SELECT count(*) FROM t"); err != nil || out != "1" {
		t.Fatalf("my_app@b1: %q %v\n%s", out, err, s.logs())
	}
	if _, err := os.Stat(filepath.Join(s.state, "seeds", "my_app")); err != nil {
		t.Errorf("seed directory: %v", err)
	}
	if out := s.mustCLI("source", "ls"); !strings.Contains(out, "my_app") {
		t.Errorf("source ls:\n%s", out)
	}
	for _, bad := range []string{"My_app", "a/b", "..", "../x", "a\x01", "_a", "a.b"} {
		if out, err := s.cli("source", "add", bad, "--empty"); err == nil {
			t.Errorf("source add %q accepted:\n%s", bad, out)
		}
	}
}

// tryConnectDB connects and runs SELECT 1.
func tryConnectDB(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, "SELECT 1")
	return err
}

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

const resetRolesSQL = `
CREATE ROLE admin LOGIN SUPERUSER PASSWORD 'admin-pw';
CREATE ROLE reader LOGIN PASSWORD 'reader-pw';
CREATE TABLE kept (v text);
GRANT SELECT ON kept TO reader;
`

// TestResetOnConnectNeedsSuperuser: pgbranch.reset=on throws away what every role
// wrote in the branch, so a role that may log in but is not a superuser of the
// branch gets 42501 and the branch keeps its rows; a superuser resets it, and the
// branch's history says who did.
func TestResetOnConnectNeedsSuperuser(t *testing.T) {
	s := startServer(t, newStateDir(t), "--auth", "scram-sha-256")
	s.seedSQL("app", resetRolesSQL)
	admin := s.dsnAs("app@shared", "admin", "admin-pw", "sslmode=disable")
	if _, err := queryAs(admin, "INSERT INTO kept VALUES ('written by admin') RETURNING 1"); err != nil {
		t.Fatal(err)
	}
	waitNoSessions(t, s, "shared") // else a reset would wait for the admin's session anyway (55006)
	reader := s.dsnAs("app@shared", "reader", "reader-pw", "sslmode=disable", "options=-cpgbranch.reset=on")
	_, err := queryAs(reader, "SELECT count(*) FROM kept")
	if pgCode(err) != "42501" || !strings.Contains(err.Error(), `permission denied to reset branch "shared"`) {
		t.Fatalf("reset by a role that is not a superuser: %v, want 42501", err)
	}
	if out, err := queryAs(admin, "SELECT v FROM kept"); err != nil || out != "written by admin" {
		t.Fatalf("the branch after a refused reset: %q, %v", out, err)
	}
	resetByAdmin := s.dsnAs("app@shared", "admin", "admin-pw", "sslmode=disable", "options=-cpgbranch.reset=on")
	// The proxy sees the admin's last session end a moment after it closed.
	var resetErr error
	eventually(t, 10*time.Second, "reset by a superuser once the other sessions ended", func() bool {
		_, resetErr = queryAs(resetByAdmin, "SELECT 1")
		return pgCode(resetErr) != "55006"
	})
	if resetErr != nil {
		t.Fatalf("reset by a superuser: %v", resetErr)
	}
	if out, err := queryAs(admin, "SELECT count(*) FROM kept"); err != nil || out != "0" {
		t.Fatalf("the branch after a superuser's reset: %q rows, %v; want 0", out, err)
	}
	if !strings.Contains(s.logs(), `reset on connect by role \"admin\"`) {
		t.Errorf("the reset's transition does not name the role:\n%s", s.logs())
	}
}

// queryAs connects with dsn, runs sql and returns its one value as text.
func queryAs(dsn, sql string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer c.Close(ctx)
	var v any
	if err := c.QueryRow(ctx, sql).Scan(&v); err != nil {
		return "", err
	}
	return fmt.Sprint(v), nil
}

package integration

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestBranchFromBranch: the child reads the parent's writes as of the fork, the
// parent does not see the child's, the parent's open session survives the fork,
// and destroying the parent leaves the child (and a grandchild) working.
func TestBranchFromBranch(t *testing.T) {
	s := startServer(t, newStateDir(t))
	s.seedSQL("shop", shopSQL)
	ctx := context.Background()

	parent := s.connect(t, "shop@parent")
	if _, err := parent.Exec(ctx, "UPDATE accounts SET owner = 'parent' WHERE id <= 10; CREATE TABLE parent_only AS SELECT 1 AS x"); err != nil {
		t.Fatal(err)
	}
	// The fork happens while the parent's session is open and idle.
	child := s.connect(t, "shop@child", "options=-cpgbranch.from=parent")
	var n int
	if err := child.QueryRow(ctx, "SELECT count(*) FROM accounts WHERE owner = 'parent'").Scan(&n); err != nil || n != 10 {
		t.Fatalf("child sees %d of the parent's rows (%v), want 10\n%s", n, err, s.logs())
	}
	if err := child.QueryRow(ctx, "SELECT count(*) FROM parent_only").Scan(&n); err != nil || n != 1 {
		t.Fatalf("child lacks the parent's table: %v", err)
	}
	// The parent's session is the same one and still works.
	if _, err := parent.Exec(ctx, "UPDATE accounts SET owner = 'after-fork' WHERE id = 11"); err != nil {
		t.Fatalf("parent session after fork: %v", err)
	}
	if err := child.QueryRow(ctx, "SELECT count(*) FROM accounts WHERE owner = 'after-fork'").Scan(&n); err != nil || n != 0 {
		t.Errorf("child sees the parent's write made after the fork")
	}
	if _, err := child.Exec(ctx, "UPDATE accounts SET owner = 'child' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	var owner string
	parent.QueryRow(ctx, "SELECT owner FROM accounts WHERE id = 1").Scan(&owner)
	if owner != "parent" {
		t.Errorf("parent sees the child's write: %q", owner)
	}
	if b := s.branches()["child"]; b.CowMode != "lazyrw" {
		t.Errorf("child cow_mode %q", b.CowMode)
	}

	if _, err := s.connectErr("shop@grandchild", "options=-cpgbranch.from=child"); err != nil {
		time.Sleep(500 * time.Millisecond)
		t.Fatalf("%v\n%s", err, s.logs())
	}
	grand := s.connect(t, "shop@grandchild")
	grand.QueryRow(ctx, "SELECT owner FROM accounts WHERE id = 1").Scan(&owner)
	if owner != "child" {
		t.Errorf("grandchild reads %q, want child's write", owner)
	}
	grand.Close(ctx)

	// Reset takes the child back to its base: the parent's state at fork time.
	child.Close(ctx)
	waitSessions(t, s, "child")
	s.mustCLI("branch", "reset", "child")
	out, err := s.psql(t, "shop@child", "SELECT owner FROM accounts WHERE id = 1")
	if err != nil || out != "parent" {
		t.Errorf("child after reset: %q %v", out, err)
	}

	parent.Close(ctx)
	waitSessions(t, s, "parent")
	s.mustCLI("branch", "destroy", "parent")
	out, err = s.psql(t, "shop@grandchild", "SELECT owner FROM accounts WHERE id = 1")
	if err != nil || out != "child" {
		t.Errorf("grandchild after its grandparent was destroyed: %q %v", out, err)
	}
	if _, err := s.psql(t, "shop@orphan", "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	// pgbranch.from names the parent of a new branch: naming another for an
	// existing one is refused, not ignored (two agents forking one new name from
	// two parents would share a branch unknowingly); naming its own is not.
	for _, name := range []string{"grandchild", "orphan"} {
		_, err := s.connectErr("shop@"+name, "options=-cpgbranch.from=parent")
		if pgCode(err) != "42P04" || !strings.Contains(err.Error(), "made from another parent") {
			t.Errorf("%s, another parent: %v, want 42P04", name, err)
		}
	}
	if _, err := s.connectErr("shop@grandchild", "options=-cpgbranch.from=child"); err != nil {
		t.Errorf("grandchild with its own parent named: %v", err)
	}
	_, err = s.connectErr("shop@x2", "options=-cpgbranch.from=nosuch")
	if pgCode(err) != "3D000" || !strings.Contains(err.Error(), `parent branch "nosuch" does not exist`) {
		t.Errorf("fork of a missing parent: %v", err)
	}
}

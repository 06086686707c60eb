package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestStaleSocketLockAfterCrash: serve and a branch's postmaster killed, the
// postmaster's socket lock file left naming a pid that is alive again by the next
// start, as after a container's restart (a new pid namespace) or a pid the dead
// postmaster's zombie still holds. Postgres takes such a lock file for another
// postmaster's and refuses to start; serve removes it, as it removes
// postmaster.pid, and the branch serves what was committed.
func TestStaleSocketLockAfterCrash(t *testing.T) {
	state := newStateDir(t)
	s := startServer(t, state)
	s.seedSQL("app", lifecycleSQL)
	mustWrite(t, s, "locked", "committed")
	postmaster := s.branches()["locked"].PID
	s.kill9()
	if err := syscall.Kill(postmaster, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	locks, _ := filepath.Glob(filepath.Join(state, "branches", "*", "run", ".s.PGSQL.5432.lock"))
	if len(locks) != 1 {
		t.Fatalf("socket lock files after the kill: %v, want the killed server's", locks)
	}
	// The lock file's first line is the pid: make it a live process of the
	// Postgres OS user's that is not the next postmaster's parent.
	other := exec.Command("sleep", "600")
	other.SysProcAttr = &syscall.SysProcAttr{Credential: postgresCred(t)}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	if err := os.WriteFile(locks[0], []byte(fmt.Sprintf("%d\n%s\n", other.Process.Pid, state)), 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := startServer(t, state)
	mustRead(t, s2, "locked", "committed")
}

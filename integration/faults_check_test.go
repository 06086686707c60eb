package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// psqlWith runs psql against the proxy with extra connection settings.
func psqlWith(s *server, db, sql string, extra ...string) (string, error) {
	cmd := exec.Command("psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", s.dsn(db, extra...), "-c", sql)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// mustRead reads row 1's v on app@branch, retrying once the branch is repaired.
func mustRead(t *testing.T, s *server, branch, want string) {
	t.Helper()
	var out string
	var err error
	for i := 0; i < 3; i++ {
		if out, err = s.psql(t, "app@"+branch, "SELECT v FROM t WHERE id = 1"); err == nil && out == want {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("app@%s: v = %q (%v), want %q\n%s", branch, out, err, want, s.logs())
}

func mustWrite(t *testing.T, s *server, branch, v string) {
	t.Helper()
	if out, err := s.psql(t, "app@"+branch, "UPDATE t SET v = '"+v+"' WHERE id = 1"); err != nil {
		t.Fatalf("write app@%s: %v %s\n%s", branch, err, out, s.logs())
	}
	// psql has exited; the proxy ends the session when it reads the Terminate. Wait
	// for that, so that an operation that refuses a branch with sessions can follow.
	eventually(t, 10*time.Second, "app@"+branch+" without sessions", func() bool {
		for _, b := range branchList(t, s) {
			if b.Name == branch {
				return b.Sessions == 0
			}
		}
		return true
	})
}

// branchList is branch ls --json as a list, to see duplicates.
func branchList(t *testing.T, s *server) []branchInfo {
	t.Helper()
	var list []branchInfo
	if err := json.Unmarshal([]byte(s.mustCLI("branch", "ls", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	return list
}

// disagreement says how the catalog, the mounts, the postmasters and the branch
// directories of s disagree, or "" when they agree: every branch listed once and at
// rest (running or stopped), each running branch mounted with its postmaster, nothing
// mounted or running for any other, one directory per branch.
func disagreement(t *testing.T, s *server) string {
	list := branchList(t, s)
	var bad []string
	seen := map[string]bool{}
	running := map[int]bool{}
	for _, b := range list {
		if seen[b.Source+"/"+b.Name] {
			bad = append(bad, "duplicate branch "+b.Name)
		}
		seen[b.Source+"/"+b.Name] = true
		switch b.State {
		case "running":
			running[b.PID] = true
		case "stopped":
		default:
			bad = append(bad, "branch "+b.Name+" is "+b.State)
		}
	}
	pms := postmastersUnder(s.state)
	for _, pid := range pms {
		if !running[pid] {
			bad = append(bad, "postmaster no running branch owns")
		}
	}
	if len(pms) != len(running) {
		bad = append(bad, "running branches without a postmaster")
	}
	if n := mountsUnder(filepath.Join(s.state, "branches")); n != len(running) {
		bad = append(bad, "mounts and running branches differ in number")
	}
	if entries, _ := os.ReadDir(filepath.Join(s.state, "branches")); len(entries) != len(list) {
		bad = append(bad, "branch directories and branches differ in number")
	}
	return strings.Join(bad, "; ")
}

// checkAgree waits (briefly: an exit is recorded asynchronously) for s's state to agree.
func checkAgree(t *testing.T, s *server) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		d := disagreement(t, s)
		if d == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("catalog, mounts and processes disagree: %s\n%s", d, s.mustCLI("branch", "ls"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func mountsUnder(dir string) int {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			n++
		}
	}
	return n
}

// waitExit waits for serve to die by itself (a crash failpoint).
func waitExit(t *testing.T, s *server) {
	t.Helper()
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not crash at its failpoint\n%s", s.logs())
	}
}

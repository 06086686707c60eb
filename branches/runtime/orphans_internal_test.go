package runtime

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// startIn starts prog (sleeping) with its working directory at dir, and kills it
// when the test ends.
func startIn(t *testing.T, prog, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(prog, "600")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// fakePostgres is a program named postgres (a copy of sleep) in a directory of
// its own.
func fakePostgres(t *testing.T) string {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(t.TempDir(), "postgres")
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return prog
}

// TestOrphansOfReplacedProgram: a backend whose program file was replaced after
// it started (a package upgrade of Postgres under a running server) is found in
// its data directory all the same; a process of another name there, or a Postgres
// one elsewhere, is not.
func TestOrphansOfReplacedProgram(t *testing.T) {
	state := t.TempDir()
	data := filepath.Join(state, "branches", "1", "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	prog := fakePostgres(t)
	backend := startIn(t, prog, data)
	elsewhere := startIn(t, prog, t.TempDir())
	other := startIn(t, "sleep", data)
	if err := os.Remove(prog); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{data, state} {
		got := Orphans(dir)
		if !slices.Contains(got, backend.Process.Pid) {
			t.Errorf("Orphans(%s) = %v: the backend of a replaced program (pid %d) is missing", dir, got, backend.Process.Pid)
		}
		if slices.Contains(got, elsewhere.Process.Pid) || slices.Contains(got, other.Process.Pid) {
			t.Errorf("Orphans(%s) = %v lists pid %d (another directory) or %d (not postgres)", dir, got,
				elsewhere.Process.Pid, other.Process.Pid)
		}
	}
}

// TestKillOrphansSparesReusedPid: a pid listed as an orphan that belongs to
// another process by the time it is killed (the orphan exited, its pid was
// reused: a Postgres of another directory, any other program) is left alone;
// one still an orphan is killed.
func TestKillOrphansSparesReusedPid(t *testing.T) {
	data := t.TempDir()
	prog := fakePostgres(t)
	orphan := startIn(t, prog, data)
	reused := []*exec.Cmd{startIn(t, prog, t.TempDir()), startIn(t, "sleep", data)}
	pids := []int{orphan.Process.Pid}
	for _, c := range reused {
		pids = append(pids, c.Process.Pid)
	}
	n, err := killOrphans(context.Background(), data, pids)
	if err != nil || n != 1 {
		t.Errorf("killOrphans: %d, %v; want 1 killed", n, err)
	}
	for _, c := range reused {
		var ws syscall.WaitStatus
		if pid, err := syscall.Wait4(c.Process.Pid, &ws, syscall.WNOHANG, nil); pid != 0 || err != nil {
			t.Errorf("pid %d (%s in %s), not an orphan of %s, was killed", c.Process.Pid, c.Path, c.Dir, data)
		}
	}
	if err := orphan.Wait(); err == nil || err.(*exec.ExitError).Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the orphan: %v, want killed", err)
	}
}

// TestOrphansUnderSymlink: a state directory named through a symbolic link (a
// volume linked into place) has its orphans found: a process's working directory
// reads as the resolved path.
func TestOrphansUnderSymlink(t *testing.T) {
	real := t.TempDir()
	data := filepath.Join(real, "branches", "1", "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "state")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	backend := startIn(t, fakePostgres(t), data)
	for _, dir := range []string{link, filepath.Join(link, "branches", "1", "data")} {
		if got := Orphans(dir); !slices.Contains(got, backend.Process.Pid) {
			t.Errorf("Orphans(%s) = %v, want pid %d, working in %s", dir, got, backend.Process.Pid, data)
		}
	}
	n, err := KillOrphans(context.Background(), link)
	if err != nil || n != 1 {
		t.Errorf("KillOrphans(%s): %d, %v; want 1 killed", link, n, err)
	}
}

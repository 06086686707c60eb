package runtime_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
)

func TestLogTail(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 20000) // pushes earlier lines out of the 16 KiB read
	tests := []struct {
		name    string
		content *string // nil: no file
		n       int
		want    string
	}{
		{"missing file", nil, 5, "(no server log)"},
		{"empty file", ptr(""), 5, ""},
		{"fewer lines than n", ptr("a\nb\n"), 5, "a; b"},
		{"last n", ptr("1\n2\n3\n4\n5\n6\n7\n"), 3, "5; 6; 7"},
		{"blank lines skipped", ptr("a\n\n   \nb\n\n\nc\n\n"), 2, "b; c"},
		{"no final newline", ptr("a\nb"), 1, "b"},
		{"zero lines", ptr("a\nb\n"), 0, ""},
		{"only the last 16 KiB", ptr("first\n" + long + "\nlast\n"), 5, strings.Repeat("x", 16384-len("\nlast\n")) + "; last"},
		{"postgres log", ptr("2026-03-14 15:09:26.535 UTC [42] LOG:  starting PostgreSQL 15.18\n" +
			"2026-03-14 15:09:26.540 UTC [42] FATAL:  data directory \"/x\" has invalid permissions\n" +
			"2026-03-14 15:09:26.540 UTC [42] DETAIL:  Permissions should be u=rwx (0700) or u=rwx,g=rx (0750).\n"), 2,
			"2026-03-14 15:09:26.540 UTC [42] FATAL:  data directory \"/x\" has invalid permissions; " +
				"2026-03-14 15:09:26.540 UTC [42] DETAIL:  Permissions should be u=rwx (0700) or u=rwx,g=rx (0750)."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "server.log")
			if tc.content != nil {
				if err := os.WriteFile(path, []byte(*tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if got := runtime.LogTail(path, tc.n); got != tc.want {
				t.Errorf("LogTail(n=%d) = %.200q, want %.200q", tc.n, got, tc.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestDataDirVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content *string
		want    string
	}{
		{"debian", ptr("15\n"), "15"},
		{"spaces", ptr("  17 \n"), "17"},
		{"old style", ptr("9.6\n"), "9.6"},
		{"missing", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if tc.content != nil {
				if err := os.WriteFile(filepath.Join(dir, "PG_VERSION"), []byte(*tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := runtime.DataDirVersion(dir)
			if tc.content == nil {
				if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "not a PostgreSQL data directory") {
					t.Errorf("DataDirVersion(no PG_VERSION) = %q, %v; want a not-exist error", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("DataDirVersion = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestBinariesDir(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		files   []string
		wantErr string // "" for success
	}{
		{"no binaries", nil, "--pg-bin"},
		{"postgres only", []string{"postgres"}, "has no initdb"},
		{"initdb only", []string{"initdb"}, "has no postgres"},
		{"both", []string{"postgres", "initdb"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			// Dir is used whatever the version asked for.
			for _, v := range []string{"", "15", "99"} {
				got, err := runtime.Binaries{Dir: dir}.Find(v)
				switch {
				case tc.wantErr == "" && (err != nil || got != dir):
					t.Errorf("Find(%q) = %q, %v; want %q", v, got, err, dir)
				case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "--pg-bin")):
					t.Errorf("Find(%q) = %q, %v; want an error naming %q and --pg-bin", v, got, err, tc.wantErr)
				}
			}
		})
	}
}

// The machine this suite runs on has PostgreSQL 15 installed the Debian way.
const pgBin15 = "/usr/lib/postgresql/15/bin"

func TestBinariesInstalled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		version string
		want    string
		wantErr string
	}{
		{"15", pgBin15, ""},
		{"", "", ""}, // pg_config's, or the newest installed: some directory with a server
		{"99", "", "install postgresql-99 or pass --pg-bin"},
	}
	for _, tc := range tests {
		t.Run("version "+tc.version, func(t *testing.T) {
			t.Parallel()
			got, err := runtime.Binaries{}.Find(tc.version)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Find(%q) = %q, %v; want an error containing %q", tc.version, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Find(%q): %v", tc.version, err)
			}
			if tc.want != "" && got != tc.want {
				t.Errorf("Find(%q) = %q, want %q", tc.version, got, tc.want)
			}
			for _, p := range []string{"postgres", "initdb", "pg_controldata"} {
				if _, err := os.Stat(filepath.Join(got, p)); err != nil {
					t.Errorf("Find(%q) = %q, which has no %s", tc.version, got, p)
				}
			}
		})
	}
}

func TestLookupUser(t *testing.T) {
	t.Parallel()
	pg, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("this machine has no postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	tests := []struct {
		name    string
		want    runtime.OSUser
		wantErr string
	}{
		{"postgres", runtime.OSUser{Name: "postgres", UID: uid, GID: gid}, ""},
		{"root", runtime.OSUser{}, "--pg-user"},
		{"no-such-user-xyz", runtime.OSUser{}, "--pg-user"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := runtime.LookupUser(tc.name)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("LookupUser(%q) = %+v, %v; want an error naming %s", tc.name, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("LookupUser(%q) = %+v, %v; want %+v", tc.name, got, err, tc.want)
			}
		})
	}
	if _, err := runtime.LookupUser("root"); err == nil || !strings.Contains(err.Error(), "root") {
		t.Errorf("LookupUser(root) = %v, want a refusal that says root", err)
	}
}

func TestFindPostmastersEmpty(t *testing.T) {
	t.Parallel()
	got, err := runtime.FindPostmasters(t.TempDir())
	if err != nil || len(got) != 0 {
		t.Errorf("FindPostmasters(empty dir) = %+v, %v; want nothing", got, err)
	}
}

// startFake starts a process whose command line looks like a postmaster's:
// argv[0] "postgres" and "-D dataDir". It is killed when the test ends.
func startFake(t *testing.T, argv0, dataDir string) int {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "sleep 60; :", "-D", dataDir)
	cmd.Args[0] = argv0
	startGroup(t, cmd)
	return cmd.Process.Pid
}

// startGroup starts cmd in a process group of its own, waits for it in the
// background (the returned channel is closed when it has exited and been reaped),
// and kills the whole group when the test ends, so no child outlives the test.
func startGroup(t *testing.T, cmd *exec.Cmd) <-chan struct{} {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	t.Cleanup(func() {
		syscall.Kill(-pid, syscall.SIGKILL)
		<-waited
	})
	return waited
}

func TestFindPostmastersFakes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	other := t.TempDir()
	want := startFake(t, "/usr/lib/postgresql/15/bin/postgres", filepath.Join(dir, "branches", "a", "data"))
	startFake(t, "postgres", dir)                               // the directory itself, not below it
	startFake(t, "postgres", dir+"-sibling/data")               // a sibling sharing the prefix
	startFake(t, "postgres", filepath.Join(other, "data"))      // another state directory
	startFake(t, "pg_ctl", filepath.Join(dir, "branches", "b")) // not a postmaster

	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := runtime.FindPostmasters(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 && got[0] == (runtime.Stray{PID: want, DataDir: filepath.Join(dir, "branches", "a", "data")}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("FindPostmasters = %+v, want only pid %d", got, want)
		}
		time.Sleep(10 * time.Millisecond) // the child may not have exec'd yet
	}
	for _, d := range []string{dir + "/", dir + "/branches"} {
		if got, _ := runtime.FindPostmasters(d); len(got) != 1 || got[0].PID != want {
			t.Errorf("FindPostmasters(%s) = %+v, want pid %d", d, got, want)
		}
	}
}

func TestAlive(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		pid  int
		want bool
	}{
		{"self", os.Getpid(), true},
		{"init", 1, true},
		{"zero", 0, false},
		{"negative", -1, false},
		{"reaped child", cmd.Process.Pid, false},
	}
	for _, tc := range tests {
		if got := runtime.Alive(tc.pid); got != tc.want {
			t.Errorf("Alive(%s %d) = %v, want %v", tc.name, tc.pid, got, tc.want)
		}
	}
}

// waitExec waits until pid's command line starts with prog, i.e. sh has exec'd it.
func waitExec(t *testing.T, pid int, prog string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if strings.HasPrefix(string(b), prog+"\x00") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d did not exec %s: cmdline %q", pid, prog, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestStopStray(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		script  string // run by sh; "exit 0" for a pid that no longer exists
		gone    bool   // wait for the process to exit before StopStray
		wantErr bool
	}{
		{"exits on SIGINT", "exec sleep 60", false, false},
		// An ignored signal stays ignored across exec: SIGQUIT, sent once ctx ends,
		// ends it, and StopStray reports the immediate shutdown.
		{"needs SIGQUIT", "trap '' INT; exec sleep 60", false, true},
		{"already gone", "exit 0", true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command("/bin/sh", "-c", tc.script)
			waited := startGroup(t, cmd)
			pid := cmd.Process.Pid
			if tc.gone {
				<-waited
			} else {
				waitExec(t, pid, "sleep")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := runtime.StopStray(ctx, pid)
			if (err != nil) != tc.wantErr {
				t.Errorf("StopStray = %v, want error %v", err, tc.wantErr)
			}
			select {
			case <-waited:
			case <-time.After(10 * time.Second):
				t.Fatal("process still running after StopStray returned")
			}
		})
	}
}

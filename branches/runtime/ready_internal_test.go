package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pidFile is postmaster.pid as Postgres 10+ writes it: pid, data directory, start
// time, port, socket directory, listen address, shared memory key, status.
func pidFile(pid, status string) string {
	return strings.Join([]string{pid, "/var/lib/pg/data", "1773501326", "5432", "/run/pg", "", "  5432001     0", status}, "\n") + "\n"
}

func TestReady(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content *string // nil: no file
		pid     int
		want    bool
	}{
		{"ready", ptr(pidFile("4242", "ready   ")), 4242, true},
		{"ready without padding or final newline", ptr(strings.TrimSuffix(pidFile("4242", "ready"), "\n")), 4242, true},
		{"pid with spaces", ptr(pidFile(" 4242 ", "ready")), 4242, true},
		{"wrong pid", ptr(pidFile("4243", "ready   ")), 4242, false},
		{"starting", ptr(pidFile("4242", "starting")), 4242, false},
		{"stopping", ptr(pidFile("4242", "stopping")), 4242, false},
		{"standby", ptr(pidFile("4242", "standby ")), 4242, false},
		{"status not yet written", ptr(strings.Join(strings.Split(pidFile("4242", "x"), "\n")[:7], "\n") + "\n"), 4242, false},
		{"short file", ptr("4242\n/var/lib/pg/data\n"), 4242, false},
		{"empty file", ptr(""), 4242, false},
		{"pid not a number", ptr(pidFile("abc", "ready")), 0, false},
		{"missing file", nil, 4242, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "postmaster.pid")
			if tc.content != nil {
				if err := os.WriteFile(path, []byte(*tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if got := ready(path, tc.pid); got != tc.want {
				t.Errorf("ready(%q, %d) = %v, want %v", ptrString(tc.content), tc.pid, got, tc.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func ptrString(s *string) string {
	if s == nil {
		return "<no file>"
	}
	return *s
}

func TestWaitReady(t *testing.T) {
	t.Parallel()
	const pid = 4242
	tests := []struct {
		name    string
		initial string                                 // postmaster.pid before the wait starts; "": none
		setup   func(dir string, exited chan struct{}) // runs in its own goroutine
		timeout time.Duration
		want    func(error) bool
	}{
		{"already ready", pidFile("4242", "ready"), nil, time.Second, func(err error) bool { return err == nil }},
		{"stale file of another pid", pidFile("1", "ready"), nil, 50 * time.Millisecond,
			func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
		{"becomes ready later", "", func(dir string, _ chan struct{}) {
			path := filepath.Join(dir, "postmaster.pid")
			time.Sleep(30 * time.Millisecond)
			os.WriteFile(path, []byte(pidFile("4242", "starting")), 0o600)
			time.Sleep(30 * time.Millisecond)
			os.WriteFile(path, []byte(pidFile("4242", "ready   ")), 0o600)
		}, 5 * time.Second, func(err error) bool { return err == nil }},
		{"exits first", "", func(_ string, exited chan struct{}) {
			time.Sleep(20 * time.Millisecond)
			close(exited)
		}, 5 * time.Second, func(err error) bool { return errors.Is(err, ErrExited) }},
		{"context ends", "", nil, 50 * time.Millisecond, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			exited := make(chan struct{})
			if tc.initial != "" {
				if err := os.WriteFile(filepath.Join(dir, "postmaster.pid"), []byte(tc.initial), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				if tc.setup != nil {
					tc.setup(dir, exited)
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			err := waitReady(ctx, dir, pid, exited)
			<-done
			if !tc.want(err) {
				t.Errorf("waitReady = %v", err)
			}
		})
	}
}

func TestWatchDirMissing(t *testing.T) {
	t.Parallel()
	if f := watchDir(filepath.Join(t.TempDir(), "missing")); f != nil {
		f.Close()
		t.Error("watchDir of a missing directory returned a descriptor")
	}
}

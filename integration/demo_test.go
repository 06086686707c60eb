package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// demoState is where `make run` keeps its state when the OS user postgres cannot
// reach the clone (scripts/run-demo.sh).
const demoState = "/var/lib/pgbranchproxy-demo"

// TestMakeRunFromPrivateClone runs `make run`, as a new user would, from a clone in a
// directory the postgres OS user cannot search (as a clone under /root is): it must
// pick a state directory that works, serve the demo source, and stop cleanly on
// Ctrl-C. An explicit STATE_DIR there still gets serve's clear refusal.
func TestMakeRunFromPrivateClone(t *testing.T) {
	private := t.TempDir() // 0700, owned by root
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(private, "src", "pgbranchproxy")
	copyCheckout(t, clone)
	_, statErr := os.Stat(demoState)
	createdState := os.IsNotExist(statErr)
	t.Cleanup(func() {
		assertNothingLeft(t, demoState)
		if createdState {
			os.RemoveAll(demoState)
		}
	})

	t.Run("ExplicitStateDirRefused", func(t *testing.T) {
		out, err := runDemo(t, clone, filepath.Join(clone, ".state"), freeAddr(t), nil)
		if err == nil || !strings.Contains(out, "is not searchable by OS user postgres") {
			t.Fatalf("make run with STATE_DIR in a private clone: %v\n%s", err, out)
		}
	})
	t.Run("DefaultWorks", func(t *testing.T) {
		addr := freeAddr(t)
		out, err := runDemo(t, clone, "", addr, func(log func() string) {
			host, port, _ := strings.Cut(addr, ":")
			cmd := exec.Command("psql", "-X", "-At", "-v", "ON_ERROR_STOP=1",
				"host="+host+" port="+port+" user=postgres dbname=demo@feature-x sslmode=disable",
				"-c", "INSERT INTO customers (id, name, email) VALUES (0, 'me', 'me@example.com')",
				"-c", "SELECT count(*) FROM customers")
			got, err := cmd.CombinedOutput()
			if err != nil || !strings.HasSuffix(strings.TrimSpace(string(got)), "10001") {
				t.Errorf("psql demo@feature-x: %v\n%s\nmake run output:\n%s", err, got, log())
			}
		})
		if err != nil {
			t.Fatalf("make run: %v\n%s", err, out)
		}
		if !strings.Contains(out, "--state-dir "+demoState+" branch ls") {
			t.Errorf("make run did not use %s:\n%s", demoState, out)
		}
	})
}

// runDemo runs `make -s run` in clone with LISTEN=addr (and STATE_DIR when set). When
// the demo prints its psql line it calls use, then sends SIGINT to the whole process
// group, as Ctrl-C in a terminal does, and waits. It returns the output and the exit
// error of serve's shutdown as the script reports it.
func runDemo(t *testing.T, clone, stateDir, addr string, use func(log func() string)) (string, error) {
	t.Helper()
	cmd := exec.Command("make", "-s", "run")
	cmd.Dir = clone
	cmd.Env = append(os.Environ(), "LISTEN="+addr, "STATE_DIR="+stateDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var mu sync.Mutex
	var buf bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.Write(p) })
	cmd.Stdout, cmd.Stderr = w, w
	log := func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(5 * time.Minute)
	for !strings.Contains(log(), "Stop: Ctrl-C") {
		select {
		case err := <-done:
			return log(), err
		case <-deadline:
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			t.Fatalf("make run did not get ready in 5 minutes:\n%s", log())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if use != nil {
		use(log)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("make run did not stop within 90s of Ctrl-C:\n%s", log())
	}
	out := log()
	if !strings.Contains(out, "pgbranchproxy stopped") {
		t.Errorf("serve did not stop cleanly on Ctrl-C:\n%s", out)
	}
	return out, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// copyCheckout copies this checkout's files (tracked and new, not ignored) to dst, as
// a fresh clone of the working tree.
func copyCheckout(t *testing.T, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	sh := `git -C .. ls-files -z -c -o --exclude-standard | (cd .. && tar --null -T - -cf - 2>/dev/null) | tar -xf - -C "$1"`
	if out, err := exec.Command("sh", "-c", sh, "sh", dst).CombinedOutput(); err != nil {
		t.Fatalf("copy checkout: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dst, "Makefile")); err != nil {
		t.Fatal(err)
	}
}

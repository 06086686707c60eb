package proxy

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ListenUnix replaces a socket file nobody listens on, refuses one a server
// holds and a file that is not a socket, and its clients are "local" to the
// failed-login count.
func TestListenUnix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := UnixSocketPath(dir, 7000)
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close() // the file stays, as after a kill -9
	ln, err := ListenUnix(dir, 7000)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o777 {
		t.Fatalf("socket mode: %v %v", st, err)
	}
	if _, err := ListenUnix(dir, 7000); err == nil || !strings.Contains(err.Error(), "another pgbranchproxy holds") {
		t.Errorf("over a socket another listener holds: %v", err)
	}
	if b, err := os.ReadFile(path + ".lock"); err != nil || string(b) != strconv.Itoa(os.Getpid())+"\n" {
		t.Errorf("lock file: %q %v, want this process's PID", b, err)
	}
	// A Postgres's lock file names its running postmaster; a socket without a
	// lock file that a server accepts on is refused too.
	os.WriteFile(UnixSocketPath(dir, 7003)+".lock", []byte(strconv.Itoa(os.Getppid())+"\n/data\n"), 0o600)
	if _, err := ListenUnix(dir, 7003); err == nil || !strings.Contains(err.Error(), "is a Postgres server using the socket") {
		t.Errorf("over a running postmaster's lock file: %v", err)
	}
	live, err := net.Listen("unix", UnixSocketPath(dir, 7004))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if _, err := ListenUnix(dir, 7004); err == nil || !strings.Contains(err.Error(), "another server is listening") {
		t.Errorf("over a socket a server accepts on: %v", err)
	}
	file := UnixSocketPath(dir, 7001)
	os.WriteFile(file, nil, 0o600)
	if _, err := ListenUnix(dir, 7001); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("over a plain file: %v", err)
	}
	if _, err := ListenUnix(filepath.Join(dir, strings.Repeat("d", 100)), 7002); err == nil {
		t.Error("a path longer than a unix socket's name can be: no error")
	}

	go func() {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := "local uid " + strconv.Itoa(os.Getuid())
	if !localConn(c) || clientHost(c) != want || (remote{c}).String() != "local" {
		t.Errorf("a unix socket client: local %v, host %q, want %q", localConn(c), clientHost(c), want)
	}
	ln.Close()
	for _, f := range []string{path, path + ".lock"} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s after Close: %v, want it removed", f, err)
		}
	}
}

// A lock file that names a killed serve not yet reaped (a zombie) is stale: the
// serve restarted after a crash takes the socket instead of refusing to start.
//
// Not parallel: the fork would hold, until its exec, the sockets other tests close.
func TestListenUnixZombieLock(t *testing.T) {
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait() // reaped only at the end: a zombie until then
	stat := "/proc/" + strconv.Itoa(p.Pid) + "/stat"
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(stat)
		if s := string(b); strings.Contains(s, ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d did not become a zombie", p.Pid)
		}
	}
	dir := t.TempDir()
	path := UnixSocketPath(dir, 7001)
	if err := os.WriteFile(path+".lock", []byte(strconv.Itoa(p.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := ListenUnix(dir, 7001)
	if err != nil {
		t.Fatalf("lock naming zombie %d: %v", p.Pid, err)
	}
	ln.Close()
}

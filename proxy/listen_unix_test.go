package proxy

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	defer ln.Close()
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o777 {
		t.Fatalf("socket mode: %v %v", st, err)
	}
	if _, err := ListenUnix(dir, 7000); err == nil || !strings.Contains(err.Error(), "another server") {
		t.Errorf("over a live socket: %v", err)
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
	if !localConn(c) || hostOf(c.RemoteAddr()) != "local" || (remote{c}).String() != "local" {
		t.Errorf("a unix socket client: local %v, host %q", localConn(c), hostOf(c.RemoteAddr()))
	}
}

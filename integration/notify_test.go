package integration

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSystemdNotify: under a service manager that follows sd_notify (systemd's
// Type=notify, as deploy/systemd's unit runs serve), serve says READY=1 once it
// takes clients, and STOPPING=1 when SIGTERM begins its stop.
func TestSystemdNotify(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	next := func() string {
		t.Helper()
		buf := make([]byte, 4096)
		ln.SetReadDeadline(time.Now().Add(time.Minute))
		n, err := ln.Read(buf)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return string(buf[:n])
	}
	s := startServer(t, newStateDir(t))
	if got := next(); !strings.HasPrefix(got, "READY=1\n") || !strings.Contains(got, s.addr) {
		t.Errorf("first notification %q, want READY=1 and the address", got)
	}
	s.stop()
	if got := next(); got != "STOPPING=1" {
		t.Errorf("notification at stop %q, want STOPPING=1", got)
	}
}

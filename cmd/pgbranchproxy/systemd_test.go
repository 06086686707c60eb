package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unitSettings reads the [Service] section of a systemd unit file.
func unitSettings(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, _ := strings.Cut(line, "=")
			out[k] = v
		}
	}
	return out
}

// The systemd unit in deploy/systemd starts serve with the example settings file,
// every line of which serve takes, waits for serve's READY=1, signals serve alone
// and gives it time to stop its branch servers after --grace.
func TestSystemdUnit(t *testing.T) {
	const dir = "../../deploy/systemd/"
	unit := unitSettings(t, dir+"pgbranchproxy.service")
	for k, want := range map[string]string{"Type": "notify", "NotifyAccess": "main", "KillMode": "mixed", "KillSignal": "SIGTERM",
		"StateDirectory": "pgbranchproxy", "RuntimeDirectory": "pgbranchproxy"} {
		if unit[k] != want {
			t.Errorf("%s=%q, want %q", k, unit[k], want)
		}
	}
	args := strings.Fields(unit["ExecStart"])
	if len(args) < 4 || args[1] != "--config" || args[len(args)-1] != "serve" {
		t.Fatalf("ExecStart=%q: want BIN --config FILE serve", unit["ExecStart"])
	}

	root := newRoot()
	serveCmd, _, err := root.Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	if err := serveCmd.ParseFlags(nil); err != nil { // merges the persistent flags in
		t.Fatal(err)
	}
	if err := configDefaults(serveCmd.Flags(), dir+"serve.conf", nil); err != nil {
		t.Fatalf("serve.conf: %v", err)
	}
	if dir := serveCmd.Flags().Lookup("unix-socket-dir").Value.String(); dir != "/run/"+unit["RuntimeDirectory"] {
		t.Errorf("unix-socket-dir = %q, not the unit's RuntimeDirectory", dir)
	}
	if sd := serveCmd.Flags().Lookup("state-dir").Value.String(); sd != "/var/lib/"+unit["StateDirectory"] {
		t.Errorf("state-dir = %q, not the unit's StateDirectory", sd)
	}
	grace, err := time.ParseDuration(serveCmd.Flags().Lookup("grace").Value.String())
	if err != nil {
		t.Fatal(err)
	}
	if start, err := strconv.Atoi(unit["TimeoutStartSec"]); err != nil || start < 300 {
		t.Errorf("TimeoutStartSec=%s: want at least 5min, for the reconcile before READY=1", unit["TimeoutStartSec"])
	}
	stop, err := strconv.Atoi(unit["TimeoutStopSec"])
	if need := grace + serverStopBound + shutdownBound; err != nil || time.Duration(stop)*time.Second < need {
		t.Errorf("TimeoutStopSec=%s: want at least %v (--grace, the branch servers' stop, the rest)", unit["TimeoutStopSec"], need)
	}
}

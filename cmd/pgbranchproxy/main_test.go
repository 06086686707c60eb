package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func TestSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pgbranchproxy.conf")
	os.WriteFile(cfg, []byte("# comment\nlisten = 0.0.0.0:7000\nidle-stop = 1m\nttl = \"2h\"\npg-setting = work_mem=8MB\npg-setting = jit=off\n"), 0o644)
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:6432", "")
	idle := fs.Duration("idle-stop", 5*time.Minute, "")
	ttl := fs.Duration("ttl", 0, "")
	settings := fs.StringArray("pg-setting", nil, "")
	if err := fs.Parse([]string{"--idle-stop", "30s"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGBRANCH_TTL", "3h")
	if err := envDefaults(fs); err != nil {
		t.Fatal(err)
	}
	if err := configDefaults(fs, cfg, nil); err != nil {
		t.Fatal(err)
	}
	if *listen != "0.0.0.0:7000" || *idle != 30*time.Second || *ttl != 3*time.Hour {
		t.Errorf("listen %s (file), idle-stop %s (command line), ttl %s (environment)", *listen, *idle, *ttl)
	}
	if strings.Join(*settings, ",") != "work_mem=8MB,jit=off" {
		t.Errorf("repeated setting: %v", *settings)
	}
	os.WriteFile(cfg, []byte("no-such-flag = 1\n"), 0o644)
	if err := configDefaults(pflag.NewFlagSet("t", pflag.ContinueOnError), cfg, nil); err == nil || !strings.Contains(err.Error(), "unknown setting") {
		t.Errorf("unknown setting: %v", err)
	}
}

func TestLoopbackListen(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:6432": true, "[::1]:6432": true, "localhost:1": true, "0.0.0.0:6432": false, ":6432": false, "10.1.2.3:5": false} {
		if got := loopbackListen(addr); got != want {
			t.Errorf("loopbackListen(%q) = %v", addr, got)
		}
	}
}

// branch set takes what it changes from its command line only: PGBRANCH_* and the
// config file, meant for other commands, change nothing.
func TestBranchSetCommandLineOnly(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "pgbranchproxy.conf")
	os.WriteFile(cfg, []byte("ttl = 2h\nquota = 1GB\n"), 0o644)
	t.Setenv("PGBRANCH_EPHEMERAL", "true")
	t.Setenv("PGBRANCH_BRANCH_MEMORY", "64MB")
	cmd := newBranchSet(&globalFlags{})
	if err := cmd.Flags().Parse([]string{"b", "--branch-pids", "50"}); err != nil {
		t.Fatal(err)
	}
	if err := envDefaults(cmd.Flags()); err != nil {
		t.Fatal(err)
	}
	if err := configDefaults(cmd.Flags(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	var changed []string
	cmd.Flags().Visit(func(f *pflag.Flag) { changed = append(changed, f.Name) })
	if strings.Join(changed, ",") != "branch-pids" {
		t.Errorf("flags set: %v, want only branch-pids (from the command line)", changed)
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"branch.create":        "branch.create",
		"x\n2026-12-02 forged": `"x\n2026-12-02 forged"`,
		"red\x1b[31m":          `"red\x1b[31m"`,
		"café":                 "café",
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestPrintableLines(t *testing.T) {
	if got := printableLines("pg_restore: error: x\n\tdetail\x1b[31m"); got != "pg_restore: error: x\n\tdetail?[31m" {
		t.Errorf("printableLines = %q", got)
	}
}

// TestBranchRm: branch rm is branch destroy, as source rm and token rm remove
// theirs (an operator typing it got "unknown command").
func TestBranchRm(t *testing.T) {
	cmd, _, err := newRoot().Find([]string{"branch", "rm", "pr-1"})
	if err != nil || cmd.Name() != "destroy" {
		t.Fatalf("branch rm finds %v (%v), want branch destroy", cmd, err)
	}
}

// The lifecycle and retention durations of serve take days as --ttl does, so that
// a config file can say "max-age = 30d" or "audit-keep = 365d".
func TestServeDurationsTakeDays(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "serve.conf")
	os.WriteFile(cfg, []byte("ttl = 7d\nmax-age = 30d\nhistory-keep = 90d\naudit-keep = 3600\n"), 0o644)
	cmd := newServe(&globalFlags{})
	if err := configDefaults(cmd.Flags(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"ttl": "7d", "max-age": "30d", "history-keep": "90d", "audit-keep": "1h0m0s"} {
		if got := cmd.Flags().Lookup(name).Value.String(); got != want {
			t.Errorf("--%s = %s, want %s", name, got, want)
		}
	}
	if d := cmd.Flags().Lookup("history-keep").DefValue; d != "90d" {
		t.Errorf("--history-keep default shows as %s", d)
	}
}

// An empty --listen (PGBRANCH_LISTEN= set to nothing) is refused rather than taken
// as every interface at a port the system picks.
func TestListenNeedsAddress(t *testing.T) {
	for listen, ok := range map[string]bool{"": false, "localhost": false, "127.0.0.1:6432": true, ":6432": true, "0.0.0.0:0": true} {
		f := &serveFlags{listen: listen, auth: "scram-sha-256", relay: "epoll", failedLogins: 20}
		if err := checkProxyFlags(f, false); (err == nil) != ok {
			t.Errorf("--listen %q: %v", listen, err)
		}
	}
}

// Every duration flag of every command takes a duration as --ttl does, days
// included (idle-stop = 7d in a config file), and refuses a negative one; those to
// which 0 means nothing (an interval, a timeout) refuse it instead of taking their
// default in silence.
func TestDurationFlagsAgree(t *testing.T) {
	positive := map[string]bool{"client-write-timeout": true, "startup-timeout": true, "create-timeout": true,
		"reap-interval": true, "node-dead-after": true, "server-idle-timeout": true}
	seen := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Value.Type() != "duration" {
				return
			}
			seen++
			name := c.CommandPath() + " --" + f.Name
			if err := f.Value.Set("7d"); err != nil || f.Value.String() != "7d" {
				t.Errorf("%s 7d: %v (reads back %s)", name, err, f.Value.String())
			}
			if err := f.Value.Set("1d"); err != nil || f.Value.String() != "1d" {
				t.Errorf("%s 1d: %v", name, err)
			}
			if err := f.Value.Set("90"); err != nil || f.Value.String() != "1m30s" {
				t.Errorf("%s 90 (seconds): %v (reads back %s)", name, err, f.Value.String())
			}
			if err := f.Value.Set("-1s"); err == nil || !strings.Contains(err.Error(), "negative") {
				t.Errorf("%s -1s: %v, want refused as negative", name, err)
			}
			if err := f.Value.Set("soon"); err == nil || !strings.Contains(err.Error(), "7d") {
				t.Errorf("%s soon: %v, want refused with examples", name, err)
			}
			if err := f.Value.Set("0"); (err == nil) == positive[f.Name] {
				t.Errorf("%s 0: %v", name, err)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
	if seen < 15 {
		t.Errorf("only %d duration flags found", seen)
	}
}

// The CLI takes serve's config file (the systemd unit's serve.conf, with a
// state-dir line) as serve does: it finds the server's admin socket by it and
// skips the settings that are serve's alone, its --ttl included, rather than
// refusing the file for them. A setting that is no command's is still refused.
func TestCLITakesServeConfig(t *testing.T) {
	conf, err := os.ReadFile("../../deploy/systemd/serve.conf")
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "serve.conf")
	os.WriteFile(cfg, append(conf, []byte("state-dir = "+state+"\nttl = 72h\nidle-stop = 7d\n")...), 0o644)
	for _, args := range [][]string{{"branch", "ls"}, {"branch", "create", "pr-1"}, {"source", "ls"}, {"info"}} {
		root := newRoot()
		root.SetArgs(append([]string{"--config", cfg}, args...))
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), "no server is running on "+filepath.Join(state, "admin.sock")) {
			t.Errorf("%v with serve's config: %v, want it to look for the server on the file's state-dir", args, err)
		}
		if len(args) > 1 && args[1] == "create" {
			create, _, _ := root.Find(args)
			if f := create.Flags().Lookup("ttl"); f.Changed {
				t.Errorf("branch create took serve's ttl = 72h as its own --ttl %s", f.Value)
			}
		}
	}
	os.WriteFile(cfg, []byte("state-dir = "+state+"\nno-such-flag = 1\n"), 0o644)
	root := newRoot()
	root.SetArgs([]string{"--config", cfg, "branch", "ls"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), `unknown setting "no-such-flag"`) {
		t.Errorf("a setting of no command: %v", err)
	}
}

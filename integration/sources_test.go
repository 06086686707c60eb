package integration

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// runAsPostgres runs a PostgreSQL program as the postgres OS user.
func runAsPostgres(t testing.TB, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(pgProgram(t, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: postgresCred(t)}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func postgresCred(t testing.TB) *syscall.Credential {
	t.Helper()
	out, err := exec.Command("id", "-u", "postgres").Output()
	if err != nil {
		t.Fatal(err)
	}
	var uid, gid uint32
	fmt.Sscan(string(out), &uid)
	out, _ = exec.Command("id", "-g", "postgres").Output()
	fmt.Sscan(string(out), &gid)
	return &syscall.Credential{Uid: uid, Gid: gid}
}

// scratchCluster makes a cluster with a table, owned by postgres, in a directory
// the test removes.
func scratchCluster(t testing.TB) (dir, pgdata string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgbranch-src-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	pgdata = filepath.Join(dir, "data")
	runAsPostgres(t, "initdb", "-D", pgdata, "-U", "postgres", "-A", "trust", "--no-instructions")
	return dir, pgdata
}

func TestSourceKinds(t *testing.T) {
	s := startServer(t, newStateDir(t))

	t.Run("Empty", func(t *testing.T) {
		s.mustCLI("source", "add", "blank", "--empty")
		out, err := s.psql(t, "postgres@e1", "SELECT count(*) FROM pg_class WHERE relname = 'accounts'")
		if err != nil || out != "0" {
			t.Fatalf("%q %v", out, err)
		}
	})

	// A running server, reached over TCP with a replication role: --from-url.
	dir, pgdata := scratchCluster(t)
	port := freeAddr(t)
	_, p, _ := net.SplitHostPort(port)
	os.WriteFile(filepath.Join(pgdata, "pg_hba.conf"), []byte("local all all trust\nhost all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n"), 0o600)
	runAsPostgres(t, "pg_ctl", "-D", pgdata, "-l", filepath.Join(dir, "log"), "-w", "-o",
		fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%s -c unix_socket_directories=%s", p, dir), "start")
	stopped := false
	stop := func() {
		if !stopped {
			runAsPostgres(t, "pg_ctl", "-D", pgdata, "-m", "fast", "-w", "stop")
			stopped = true
		}
	}
	t.Cleanup(stop)
	runAsPostgres(t, "psql", "-X", "-h", dir, "-p", p, "-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1",
		"-c", "CREATE DATABASE inv", "-c", `\c inv`, "-c", "CREATE TABLE items AS SELECT g AS id FROM generate_series(1, 500) g")

	t.Run("FromURL", func(t *testing.T) {
		s.mustCLI("source", "add", "live", "--from-url", fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres", p))
		out, err := s.psql(t, "inv@u1", "SELECT count(*) FROM items")
		if err != nil || out != "500" {
			t.Fatalf("%q %v\n%s", out, err, s.logs())
		}
	})

	t.Run("FromDatadir", func(t *testing.T) {
		if _, err := s.cli("source", "add", "copy", "--from-datadir", pgdata); err == nil {
			t.Fatal("a running cluster's data directory was accepted")
		}
		stop()
		s.mustCLI("source", "add", "copy", "--from-datadir", pgdata)
		// Two sources have database inv: the option picks one.
		_, err := s.connectErr("inv@d1")
		if pgCode(err) != "3D000" || !strings.Contains(err.Error(), "several sources") {
			t.Fatalf("ambiguous database: %v", err)
		}
		c := s.connect(t, "inv@d1", "options=-cpgbranch.source=copy")
		var n int
		if err := c.QueryRow(t.Context(), "SELECT count(*) FROM items").Scan(&n); err != nil || n != 500 {
			t.Fatalf("%d %v", n, err)
		}
		// A branch that exists settles it: d1 is copy's, u1 live's, and their
		// connection strings need no option.
		for _, db := range []string{"inv@d1", "inv@u1"} {
			if out, err := s.psql(t, db, "SELECT count(*) FROM items"); err != nil || out != "500" {
				t.Errorf("%s without pgbranch.source: %q %v", db, out, err)
			}
		}
	})

	t.Run("SeedsKeepOneTrimmedWALSegment", func(t *testing.T) {
		for _, src := range []string{"live", "copy"} {
			wal := filepath.Join(seedDir(s, src), "pg_wal")
			entries, _ := os.ReadDir(wal)
			var segs []string
			var allocated int64
			for _, e := range entries {
				if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
					segs = append(segs, e.Name())
					allocated += info.Sys().(*syscall.Stat_t).Blocks * 512
				}
			}
			if len(segs) != 1 || allocated > 1<<20 {
				t.Errorf("seed %s: WAL segments %v, %d bytes allocated; want one, at most 1 MiB", src, segs, allocated)
			}
		}
	})

	t.Run("BadSourcesLeaveNothing", func(t *testing.T) {
		bad := filepath.Join(filepath.Dir(s.state), "bad.sql")
		os.WriteFile(bad, []byte("CREATE TABLE ok (x int);\nSELECT no_such_function();\n"), 0o644)
		out, err := s.cli("source", "add", "broken", "--from-sql", bad)
		if err == nil || !strings.Contains(out, "bad.sql:2: ERROR:  function no_such_function() does not exist") || strings.Contains(out, "<stdin>") {
			t.Fatalf("failing SQL file: %v\n%s", err, out)
		}
		if _, err := s.cli("source", "add", "Bad Name", "--empty"); err == nil {
			t.Error("invalid source name accepted")
		}
		if _, err := s.cli("source", "add", "nothere", "--from-url", "postgres://postgres@127.0.0.1:1/postgres"); err == nil {
			t.Error("unreachable URL accepted")
		}
		out = s.mustCLI("source", "ls")
		for _, name := range []string{"broken", "nothere"} {
			if strings.Contains(out, name) {
				t.Errorf("failed source %s listed:\n%s", name, out)
			}
		}
		entries, _ := os.ReadDir(filepath.Join(s.state, "build"))
		if len(entries) != 0 {
			t.Errorf("build area not cleaned: %v", entries)
		}
	})

	t.Run("RemoveSource", func(t *testing.T) {
		if _, err := s.cli("source", "rm", "blank"); err == nil {
			t.Fatal("removed a source that has branches")
		}
		s.mustCLI("branch", "destroy", "e1")
		s.mustCLI("source", "rm", "blank")
		if _, err := os.Stat(filepath.Join(s.state, "seeds", "blank")); !os.IsNotExist(err) {
			t.Errorf("seed of a removed source left: %v", err)
		}
	})
}

func TestSourceRefresh(t *testing.T) {
	s := startServer(t, newStateDir(t))
	sqlFile := filepath.Join(filepath.Dir(s.state), "app.sql")
	os.WriteFile(sqlFile, []byte("CREATE TABLE v AS SELECT 1 AS gen;"), 0o644)
	s.mustCLI("source", "add", "app", "--from-sql", sqlFile)
	if out, err := s.psql(t, "app@old", "SELECT gen FROM v"); err != nil || out != "1" {
		t.Fatalf("%q %v", out, err)
	}
	os.WriteFile(sqlFile, []byte("CREATE TABLE v AS SELECT 2 AS gen;"), 0o644)
	out := s.mustCLI("source", "refresh", "app")
	if !strings.Contains(out, "generation 2") {
		t.Fatalf("refresh: %s", out)
	}
	if out, err := s.psql(t, "app@new", "SELECT gen FROM v"); err != nil || out != "2" {
		t.Fatalf("new branch after refresh: %q %v", out, err)
	}
	if out, err := s.psql(t, "app@old", "SELECT gen FROM v"); err != nil || out != "1" {
		t.Fatalf("old branch after refresh: %q %v", out, err)
	}
	g1 := filepath.Join(s.state, "seeds", "app", "g1")
	if _, err := os.Stat(g1); err != nil {
		t.Fatalf("generation 1 removed while a branch uses it: %v", err)
	}
	s.mustCLI("branch", "destroy", "old")
	if _, err := os.Stat(g1); !os.IsNotExist(err) {
		t.Errorf("generation 1 kept after its last branch went: %v", err)
	}
}

// TestOneLineErrors: what an operator gets wrong is said in one line with what to do.
func TestOneLineErrors(t *testing.T) {
	state := newStateDir(t)
	for _, tc := range []struct {
		args []string
		asPG bool
		want string
	}{
		{[]string{"serve"}, true, "must run as root"},
		{[]string{"serve", "--pg-user", "no-such-user-x"}, false, "--pg-user"},
		{[]string{"serve", "--pg-bin", "/nonexistent"}, false, "--pg-bin"},
		{[]string{"serve", "--listen", "0.0.0.0:0", "--auth", "trust"}, false, "--insecure-trust"},
		{[]string{"branch", "ls"}, false, "no server is running"},
	} {
		cmd := exec.Command(binPath, append([]string{"--state-dir", state}, tc.args...)...)
		if tc.asPG {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: postgresCred(t)}
		}
		out, err := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err == nil || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
			t.Errorf("%v: %v\n%s", tc.args, err, out)
		}
	}
}

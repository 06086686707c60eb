package integration

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tortureSQL makes a ~250 MB table frozen by the settle and a smaller one that was
// never vacuumed before seeding (the settle is what freezes it).
const tortureSQL = `
CREATE TABLE big (id int PRIMARY KEY, pad text NOT NULL);
INSERT INTO big SELECT g, repeat(md5(g::text), 6) FROM generate_series(1, 1000000) g;
CREATE TABLE unvacuumed (id int, pad text);
INSERT INTO unvacuumed SELECT g, repeat('u', 100) FROM generate_series(1, 200000) g;
CREATE TABLE small (id int PRIMARY KEY, v int);
INSERT INTO small SELECT g, 0 FROM generate_series(1, 100) g;
`

// pgProgram finds a PostgreSQL program in pg_config's bindir.
func pgProgram(t testing.TB, name string) string {
	t.Helper()
	out, err := exec.Command("pg_config", "--bindir").Output()
	if err != nil {
		t.Fatalf("pg_config: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), name)
}

// upperOf finds a running branch's upper directory from its postmaster's -D.
func (s *server) upperOf(t testing.TB, branch string) string {
	t.Helper()
	b, ok := s.branches()[branch]
	if !ok || b.PID == 0 {
		t.Fatalf("branch %s is not running: %+v", branch, b)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", b.PID))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(string(raw), "\x00")
	for i := range args {
		if args[i] == "-D" && i+1 < len(args) {
			return filepath.Join(filepath.Dir(args[i+1]), "upper")
		}
	}
	t.Fatalf("no -D in %q", args)
	return ""
}

// relationBytes is the allocated size of relation files (base/, global/) in an upper dir.
func relationBytes(t testing.TB, upper string) int64 {
	t.Helper()
	var total int64
	for _, sub := range []string{"base", "global", "pg_tblspc"} {
		filepath.WalkDir(filepath.Join(upper, sub), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			// pg_internal.init is the relation cache's file, written by the first
			// backend in a database that has none (the proxy's roles read starts one
			// in the maintenance database whenever its pass comes): not relation data.
			if d.Name() == "pg_internal.init" {
				return nil
			}
			if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
				total += info.Sys().(*syscall.Stat_t).Blocks * 512
			}
			return nil
		})
	}
	return total
}

const readPass = `
SELECT count(*) FROM big;
EXPLAIN SELECT * FROM big WHERE id = 5;
SELECT pg_relation_size('big'), pg_relation_size('unvacuumed'), pg_total_relation_size('big');
SELECT sum(length(pad)) FROM big;
SELECT count(*), sum(id) FROM unvacuumed;
SELECT * FROM big WHERE id = 777;
CHECKPOINT;
`

func TestCopyOnWriteTorture(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds a 250 MB table")
	}
	state := newStateDir(t)
	// The epoll loop, whatever INTEGRATION_RELAY says: CREATE DATABASE … TEMPLATE
	// below needs the branch's parked sessions closed, which the kernel relay,
	// reading no statements, does not do (README).
	s := startServer(t, state, "--relay", "epoll")
	s.seedSQL("cow", strings.ReplaceAll(tortureSQL, "1000000", bigRows()))
	seedBefore := seedChecksum(t, seedDir(s, "cow"))
	ctx := context.Background()
	exec1 := func(db, sql string) {
		t.Helper()
		if out, err := s.psql(t, db, sql); err != nil {
			t.Fatalf("%s: %v\n%s", sql, err, out)
		}
	}

	t.Run("ReadPassCopiesNothing", func(t *testing.T) {
		exec1("cow@reads", "SELECT 1")
		upper := s.upperOf(t, "reads")
		before := relationBytes(t, upper)
		exec1("cow@reads", readPass)
		first := relationBytes(t, upper)
		exec1("cow@reads", readPass)
		second := relationBytes(t, upper)
		t.Logf("relation bytes: after create %d, after read pass %d, after second pass %d", before, first, second)
		if first != before || second != first {
			t.Errorf("read passes copied relation data: %d -> %d -> %d", before, first, second)
		}
		if b := s.branches()["reads"]; b.CowMode != "lazyrw" || b.OwnedBytes > 4<<20 {
			t.Errorf("branch after reads: cow_mode %s, owned %d bytes", b.CowMode, b.OwnedBytes)
		}
	})

	t.Run("WritesCopyOnce", func(t *testing.T) {
		exec1("cow@writes", "SELECT 1")
		upper := s.upperOf(t, "writes")
		base := relationBytes(t, upper)
		exec1("cow@writes", "UPDATE small SET v = v + 1 WHERE id = 1; CHECKPOINT")
		small := relationBytes(t, upper)
		exec1("cow@writes", "UPDATE big SET pad = 'x' WHERE id = 1; CHECKPOINT")
		first := relationBytes(t, upper)
		exec1("cow@writes", "UPDATE big SET pad = 'y' WHERE id = 2; CHECKPOINT")
		second := relationBytes(t, upper)
		t.Logf("relation bytes: base %d, +small update %d, +big update %d, +second big update %d", base, small-base, first-small, second-first)
		if small-base > 100<<10 {
			t.Errorf("1-row update of a small table copied %d bytes", small-base)
		}
		if first-small < 200<<20/int64(tortureScale()) {
			t.Errorf("1-row update of big copied only %d bytes; expected its segment", first-small)
		}
		if second-first > 1<<20 {
			t.Errorf("second update of big copied %d more bytes", second-first)
		}
	})

	t.Run("DDLWorks", func(t *testing.T) {
		exec1("cow@ddl", "SELECT 1")
		upper := s.upperOf(t, "ddl")
		base := relationBytes(t, upper)
		exec1("cow@ddl", "TRUNCATE unvacuumed; CHECKPOINT")
		if got := relationBytes(t, upper) - base; got > 4<<20 {
			t.Errorf("TRUNCATE copied %d bytes", got)
		}
		exec1("cow@ddl", "CREATE INDEX big_pad_idx ON big (pad)")
		exec1("cow@ddl", "VACUUM FULL small")
		exec1("cow@ddl", "DROP TABLE big")
		exec1("cow@ddl", "CREATE DATABASE copy1 STRATEGY FILE_COPY")
		exec1("cow@ddl", "CREATE DATABASE copy2 STRATEGY WAL_LOG TEMPLATE cow")
		if out, err := s.psql(t, "cow@ddl", "SELECT count(*) FROM small"); err != nil || out != "100" {
			t.Errorf("after DDL: %q %v", out, err)
		}
		// The other branches and the seed are untouched.
		if out, err := s.psql(t, "cow@reads", "SELECT count(*) FROM big"); err != nil || out != bigRows() {
			t.Errorf("branch reads after ddl dropped big: %q %v", out, err)
		}
	})

	t.Run("TPCBKilledRecovers", func(t *testing.T) {
		dsn := s.dsn("cow@tpcb")
		if out, err := exec.Command("pgbench", "-i", "-q", "-s", "2", dsn).CombinedOutput(); err != nil {
			t.Fatalf("pgbench -i: %v\n%s", err, out)
		}
		bench := exec.Command("pgbench", "-c", "4", "-j", "2", "-T", "30", dsn)
		if err := bench.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- bench.Wait() }()
		time.Sleep(3 * time.Second)
		pid := s.branches()["tpcb"].PID
		if pid == 0 {
			t.Fatal("tpcb not running")
		}
		syscall.Kill(pid, syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			bench.Process.Kill()
			t.Fatal("pgbench did not end after the branch server was killed")
		}
		// The next connection wakes the branch, which recovers from its WAL.
		deadline := time.Now().Add(30 * time.Second)
		var out string
		var err error
		for time.Now().Before(deadline) {
			out, err = s.psql(t, "cow@tpcb", `SELECT (SELECT sum(abalance) FROM pgbench_accounts) = (SELECT sum(tbalance) FROM pgbench_tellers)
				AND (SELECT sum(tbalance) FROM pgbench_tellers) = (SELECT sum(bbalance) FROM pgbench_branches)
				AND (SELECT sum(bbalance) FROM pgbench_branches) = (SELECT coalesce(sum(delta), 0) FROM pgbench_history),
				(SELECT count(*) FROM pgbench_history)`)
			if err == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil || !strings.HasPrefix(out, "t|") || out == "t|0" {
			t.Fatalf("balances after SIGKILL: %q %v\n%s", out, err, s.logs())
		}
		t.Logf("after SIGKILL and recovery: %s (balances agree | history rows)", out)
		if b := s.branches()["tpcb"]; b.CowMode != "lazyrw" || b.State != "running" {
			t.Errorf("tpcb after recovery: %+v", b)
		}
		amcheck := exec.Command(pgProgram(t, "pg_amcheck"), "--install-missing", "--heapallindexed", "--verbose", dsn)
		if raw, err := amcheck.CombinedOutput(); err != nil || !strings.Contains(string(raw), "pgbench_accounts") {
			t.Fatalf("pg_amcheck: %v\n%s", err, raw)
		}
	})

	t.Run("ResetReturnsToSeed", func(t *testing.T) {
		s.mustCLI("branch", "reset", "ddl")
		if out, err := s.psql(t, "cow@ddl", "SELECT count(*) FROM big"); err != nil || out != bigRows() {
			t.Fatalf("after reset: %q %v", out, err)
		}
		if out, _ := s.psql(t, "cow@ddl", "SELECT count(*) FROM pg_database WHERE datname LIKE 'copy%'"); out != "0" {
			t.Errorf("databases created before reset survive it: %s", out)
		}
	})

	if got := seedChecksum(t, seedDir(s, "cow")); got != seedBefore {
		t.Fatal("the seed changed")
	}

	// The control: without the shim, the same read pass copies the table.
	s.stop()
	eager := startServer(t, state, "--lazyrw=off")
	t.Run("EagerControl", func(t *testing.T) {
		if out, err := eager.psql(t, "cow@eager", "SELECT 1"); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		upper := eager.upperOf(t, "eager")
		before := relationBytes(t, upper)
		if out, err := eager.psql(t, "cow@eager", readPass); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		after := relationBytes(t, upper)
		t.Logf("eager read pass copied %d bytes", after-before)
		if b := eager.branches()["eager"]; b.CowMode != "eager" {
			t.Errorf("cow_mode %q with --lazyrw=off", b.CowMode)
		}
		if after-before < 200<<20/int64(tortureScale()) {
			t.Errorf("eager read pass copied only %d bytes", after-before)
		}
	})
	_ = ctx
}

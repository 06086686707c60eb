package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestFromURLPreparedTransaction: a base backup taken while a two-phase
// transaction was prepared holds it. The seed's server starts on it although the
// copied configuration allows no prepared transactions (the origin's came from its
// command line, as a Debian cluster's comes from /etc), and rolls it back: no
// branch holds its locks, and a masked seed holds none of its rows.
func TestFromURLPreparedTransaction(t *testing.T) {
	s := startServer(t, newStateDir(t))
	dir, pgdata := scratchCluster(t)
	_, p, _ := net.SplitHostPort(freeAddr(t))
	os.WriteFile(filepath.Join(pgdata, "pg_hba.conf"), []byte("local all all trust\nhost replication all 127.0.0.1/32 trust\n"), 0o600)
	runAsPostgres(t, "pg_ctl", "-D", pgdata, "-l", filepath.Join(dir, "log"), "-w", "-o",
		fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%s -c unix_socket_directories=%s -c max_prepared_transactions=3", p, dir), "start")
	t.Cleanup(func() { runAsPostgres(t, "pg_ctl", "-D", pgdata, "-m", "fast", "-w", "stop") })
	runAsPostgres(t, "psql", "-X", "-h", dir, "-p", p, "-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1",
		"-c", "CREATE DATABASE app", "-c", `\c app`,
		"-c", "CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'one')",
		"-c", "BEGIN; INSERT INTO t VALUES (2, '"+planted+"'); UPDATE t SET v = 'uno' WHERE id = 1; PREPARE TRANSACTION 'tx1'")

	maskFile := filepath.Join(dir, "mask.sql")
	os.WriteFile(maskFile, []byte("UPDATE t SET v = 'masked';"), 0o644)
	out := s.mustCLI("source", "add", "live", "--from-url", fmt.Sprintf("postgres://postgres@127.0.0.1:%s/app", p), "--mask", maskFile)
	got, err := s.psql(t, "app@b1", "SET lock_timeout = '5s'; SELECT count(*) FROM pg_prepared_xacts; UPDATE t SET v = 'x' WHERE id = 1 RETURNING id")
	if err != nil || got != "SET\n0\n1\nUPDATE 1" {
		t.Errorf("branch: %q %v\n%s", got, err, out)
	}
	if found := filesHolding(t, filepath.Join(s.state, "seeds", "live", "g1"), planted); len(found) > 0 {
		t.Errorf("masked seed holds the prepared transaction's row in %v", found)
	}
}

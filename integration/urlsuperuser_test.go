package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestFromURLReplicationRole: --from-url with a role that has REPLICATION and
// nothing more, as the README advises, from a cluster whose bootstrap superuser
// is not called postgres (initdb -U admin): the seed is settled as that
// superuser, found from the copy's roles.
func TestFromURLReplicationRole(t *testing.T) {
	s := startServer(t, newStateDir(t))
	dir, err := os.MkdirTemp("", "pgbranch-src-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	pgdata := filepath.Join(dir, "data")
	runAsPostgres(t, "initdb", "-D", pgdata, "-U", "admin", "-A", "trust", "--no-instructions")
	_, p, _ := net.SplitHostPort(freeAddr(t))
	os.WriteFile(filepath.Join(pgdata, "pg_hba.conf"), []byte("local all all trust\nhost replication repl 127.0.0.1/32 trust\n"), 0o600)
	runAsPostgres(t, "pg_ctl", "-D", pgdata, "-l", filepath.Join(dir, "log"), "-w", "-o",
		fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%s -c unix_socket_directories=%s", p, dir), "start")
	t.Cleanup(func() { runAsPostgres(t, "pg_ctl", "-D", pgdata, "-m", "fast", "-w", "stop") })
	runAsPostgres(t, "psql", "-X", "-h", dir, "-p", p, "-U", "admin", "-d", "postgres", "-v", "ON_ERROR_STOP=1",
		"-c", "CREATE ROLE repl LOGIN REPLICATION", "-c", "CREATE DATABASE inv", "-c", `\c inv`,
		"-c", "CREATE TABLE items AS SELECT g AS id FROM generate_series(1, 500) g")

	s.mustCLI("source", "add", "live", "--from-url", fmt.Sprintf("postgres://repl@127.0.0.1:%s/inv", p))
	c := s.connect(t, "inv@u1", "user=admin")
	var n int
	if err := c.QueryRow(t.Context(), "SELECT count(*) FROM items").Scan(&n); err != nil || n != 500 {
		t.Fatalf("items: %d %v", n, err)
	}
}

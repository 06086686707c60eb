package integration

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestFromDatadirTablespace: a stopped cluster's tablespace (pg_tblspc/OID, a link
// to a directory of the cluster's) is copied into the seed. Its files stay the
// cluster's: neither the seed's settling nor a branch's writes touch them, and one
// branch's writes are not another's. Copies of a branch that recover from a
// backup label (a fork of a branch in use, a source from a branch) start on them.
func TestFromDatadirTablespace(t *testing.T) {
	s := startServer(t, newStateDir(t))
	dir, pgdata := scratchCluster(t)
	ts := filepath.Join(dir, "ts")
	cred := postgresCred(t)
	if err := os.Mkdir(ts, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(ts, int(cred.Uid), int(cred.Gid)); err != nil {
		t.Fatal(err)
	}
	runAsPostgres(t, "pg_ctl", "-D", pgdata, "-l", filepath.Join(dir, "log"), "-w", "-o",
		"-c listen_addresses= -c unix_socket_directories="+dir, "start")
	runAsPostgres(t, "psql", "-X", "-h", dir, "-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1",
		"-c", "CREATE TABLESPACE ts LOCATION '"+ts+"'", "-c", "CREATE DATABASE app",
		"-c", `\c app`, "-c", "CREATE TABLE t (x int) TABLESPACE ts; INSERT INTO t SELECT generate_series(1, 1000)")
	runAsPostgres(t, "pg_ctl", "-D", pgdata, "-m", "fast", "-w", "stop")
	before := treeBytes(t, ts)

	out := s.mustCLI("source", "add", "copy", "--from-datadir", pgdata)
	if got, err := s.psql(t, "app@b1", "INSERT INTO t SELECT generate_series(1, 5000); CHECKPOINT; SELECT count(*) FROM t"); err != nil || got != "INSERT 0 5000\nCHECKPOINT\n6000" {
		t.Fatalf("b1: %q %v\n%s", got, err, out)
	}
	if got, err := s.psql(t, "app@b2", "SELECT count(*) FROM t"); err != nil || got != "1000" {
		t.Errorf("b2 sees %q (%v), want the seed's 1000 rows", got, err)
	}
	// Copies that recover from a backup label: a branch of b1 while a session
	// holds it, and a source from it.
	c := s.connect(t, "app@b1")
	s.mustCLI("branch", "create", "kid", "--from", "b1")
	c.Close(t.Context())
	if got, err := s.psql(t, "app@kid", "SELECT count(*) FROM t"); err != nil || got != "6000" {
		t.Errorf("kid sees %q (%v), want b1's 6000 rows", got, err)
	}
	s.mustCLI("source", "add", "fromb1", "--from-branch", "copy/b1")
	c = s.connect(t, "app@f1", "options=-cpgbranch.source=fromb1")
	var n int
	if err := c.QueryRow(t.Context(), "SELECT count(*) FROM t").Scan(&n); err != nil || n != 6000 {
		t.Errorf("a branch of the source from b1 sees %d rows (%v), want 6000", n, err)
	}
	if after := treeBytes(t, ts); !bytes.Equal(before, after) {
		t.Errorf("the cluster's tablespace changed: %d bytes before, %d after", len(before), len(after))
	}
}

// treeBytes is the bytes of every file under dir, in path order.
func treeBytes(t *testing.T, dir string) []byte {
	t.Helper()
	var all []byte
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		all = append(append(all, p...), b...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

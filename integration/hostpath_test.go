package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemoteTokenReadsNoHostFile: over --admin-listen even an admin token may not
// add a source read from a path of the server's host, which serve reads as root
// (psql's error would quote the file: root's line of /etc/shadow), nor one copied
// from a cluster of the host over its unix socket, which trusts serve's --pg-user
// (peer authentication) and no one over the network; the admin socket may.
func TestRemoteTokenReadsNoHostFile(t *testing.T) {
	addr := freeAddr(t)
	bootstrap := "a-long-enough-admin-token"
	s := startServer(t, newStateDir(t), "--admin-listen", addr, "--admin-token", bootstrap)
	socket := hostOnlyCluster(t)
	viaSocket := fmt.Sprintf("host=%s port=5432 user=postgres dbname=postgres", socket)
	for _, body := range []string{
		`{"Name":"leak","Kind":"sql","SQLFile":"/etc/shadow"}`,
		`{"Name":"leak","Kind":"datadir","DataDir":"/root"}`,
		`{"Name":"leak","Kind":"url","URL":"` + viaSocket + `"}`,
	} {
		code, out := adminCall(t, addr, bootstrap, "POST", "/v1/sources", body)
		if code != 403 || strings.Contains(out, "root:") {
			t.Errorf("%s over --admin-listen: %d %s, want 403", body, code, out)
		}
	}
	if out := s.mustCLI("audit", "ls"); !strings.Contains(out, "source.add") || !strings.Contains(out, "403") {
		t.Errorf("the refusal is not in the audit log:\n%s", out)
	}
	if out := s.mustCLI("source", "ls"); strings.Contains(out, "leak") {
		t.Errorf("a source was added:\n%s", out)
	}
	s.seedSQL("app", lifecycleSQL) // over the admin socket, as root
	s.mustCLI("source", "add", "host", "--from-url", viaSocket)
	if out, err := queryAs(s.dsn("postgres@h1", "options=-cpgbranch.source=host"), "SELECT v FROM only_on_this_host"); err != nil || out != "host" {
		t.Fatalf("the host's cluster added over the admin socket: %q %v", out, err)
	}
}

// hostOnlyCluster starts a cluster that listens on a unix socket only and lets in
// the OS user postgres as itself (peer), with a table; it returns the socket's
// directory.
func hostOnlyCluster(t *testing.T) string {
	t.Helper()
	dir, pgdata := scratchCluster(t)
	os.WriteFile(filepath.Join(pgdata, "pg_hba.conf"), []byte("local all all peer\nlocal replication all peer\n"), 0o600)
	runAsPostgres(t, "pg_ctl", "-D", pgdata, "-l", filepath.Join(dir, "log"), "-w", "-o",
		"-c listen_addresses= -c unix_socket_directories="+dir, "start")
	t.Cleanup(func() { runAsPostgres(t, "pg_ctl", "-D", pgdata, "-m", "fast", "-w", "stop") })
	runAsPostgres(t, "psql", "-X", "-h", dir, "-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1",
		"-c", "CREATE TABLE only_on_this_host AS SELECT 'host' AS v")
	return dir
}

package integration

import (
	"strings"
	"testing"
)

// TestRemoteTokenReadsNoHostFile: over --admin-listen even an admin token may not
// add a source read from a path of the server's host, which serve reads as root
// (psql's error would quote the file: root's line of /etc/shadow); the admin
// socket may.
func TestRemoteTokenReadsNoHostFile(t *testing.T) {
	addr := freeAddr(t)
	bootstrap := "a-long-enough-admin-token"
	s := startServer(t, newStateDir(t), "--admin-listen", addr, "--admin-token", bootstrap)
	for _, body := range []string{
		`{"Name":"leak","Kind":"sql","SQLFile":"/etc/shadow"}`,
		`{"Name":"leak","Kind":"datadir","DataDir":"/root"}`,
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
}

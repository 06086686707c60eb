package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHostPathSourcesLocalOnly: a source read from a path of the server's host
// (an SQL file, a data directory, a dump), which the server reads as root, or
// copied over a unix socket of the host or by a service of its file, where the
// server's --pg-user is the credential, may be
// added over the admin socket only; a token over --admin-listen, even an admin's,
// gets 403 before anything is read, and the refusal is audited. Sources that name
// no path of the host may be added with a token.
func TestHostPathSourcesLocalOnly(t *testing.T) {
	t.Parallel()
	f := &fakeManager{}
	a, cat := newAPI(t, f, http.NotFoundHandler(), "")
	admin := mint(t, a.Local(), "ops", "admin", "")
	for _, body := range []string{
		`{"Name":"x","Kind":"sql","SQLFile":"/etc/shadow"}`,
		`{"Name":"x","Kind":"sql"}`,
		`{"Name":"x","Kind":"datadir","DataDir":"/root"}`,
		`{"Name":"x","Kind":"dump","DumpPath":"/root/secret.dump"}`,
		`{"Name":"x","Kind":"url","URL":"host=/var/run/postgresql user=postgres"}`,
		`{"Name":"x","Kind":"url","URL":"postgres:///app"}`,
		`{"Name":"x","Kind":"url","URL":"postgres://db/app?service=local"}`,
	} {
		rec := call(t, a.Remote(), admin, http.MethodPost, "/v1/sources", body)
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "path of the server's host") {
			t.Errorf("%s with an admin token: %d %s, want 403", body, rec.Code, rec.Body)
		}
	}
	if len(f.calls) != 0 {
		t.Fatalf("the manager was called: %v", f.calls)
	}
	for _, body := range []string{
		`{"Name":"u","Kind":"url","URL":"postgres://repl@db/app"}`,
		`{"Name":"b","Kind":"branch","Branch":"app/mig"}`,
		`{"Name":"e","Kind":"empty"}`,
	} {
		if rec := call(t, a.Remote(), admin, http.MethodPost, "/v1/sources", body); rec.Code != http.StatusOK {
			t.Errorf("%s with an admin token: %d %s, want 200", body, rec.Code, rec.Body)
		}
	}
	if rec := do(t, a.Local(), http.MethodPost, "/v1/sources", `{"Name":"s","Kind":"sql","SQLFile":"/srv/schema.sql"}`); rec.Code != http.StatusOK {
		t.Errorf("an SQL file over the admin socket: %d %s, want 200", rec.Code, rec.Body)
	}
	entries, err := cat.Audit(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, e := range entries {
		if e.Action == "source.add" && e.Actor == "ops" && strings.HasPrefix(e.Result, "403 ") {
			refused++
		}
	}
	if refused != 7 {
		t.Errorf("%d refused source adds audited, want 7: %+v", refused, entries)
	}
}

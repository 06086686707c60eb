package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
)

func TestAuditLog(t *testing.T) {
	t.Parallel()
	f := &fakeManager{}
	a, cat := newAPI(t, f, nil, "sixteen-chars-ok")
	ci := mint(t, a.Local(), "github", "ci", "pr-")
	h := a.Remote()
	call(t, h, ci, "POST", "/v1/branches", `{"name":"pr-1","source":"app"}`)
	call(t, h, ci, "GET", "/v1/branches", "")                        // a read: not logged
	call(t, h, ci, "POST", "/v1/branches/main/reset?source=app", "") // refused
	call(t, h, ci, "GET", "/v1/tokens", "")                          // a refused read: logged
	call(t, h, "wrong", "DELETE", "/v1/branches/pr-1", "")           // no valid token: not logged
	f.err = errors.New("mount failed")
	call(t, h, "sixteen-chars-ok", "DELETE", "/v1/branches/pr-1", "")
	call(t, h, "sixteen-chars-ok", "POST", "/v1/sources", `{"name":"shop","kind":"empty"}`) // fails mid-stream
	f.err = nil
	call(t, a.Local(), "", "POST", "/v1/branches/pr-2/stop?force=true", "")
	call(t, a.Local(), "", "POST", "/v1/branches/pr-2/stop", "") // the force was that request's only
	call(t, a.Local(), "", "DELETE", "/v1/tokens/github", "")

	got, err := cat.Audit(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"local token.create github ok",
		"github branch.create app/pr-1 ok",
		`github branch.reset app/main 403 token "github" (role ci, prefix "pr-") may not branch.reset branch main`,
		`github GET /v1/tokens  403 token "github" (role ci, prefix "pr-") may not GET /v1/tokens`,
		"bootstrap branch.destroy pr-1 500 mount failed",
		"bootstrap source.add shop 500 mount failed",
		"local branch.stop --force pr-2 ok",
		"local branch.stop pr-2 ok",
		"local token.remove github ok",
	}
	var lines []string
	for _, e := range got {
		lines = append(lines, strings.Join([]string{e.Actor, e.Action, e.Target, e.Result}, " "))
		if e.At.IsZero() || (e.Actor == "local") != (e.Remote == "") {
			t.Errorf("entry %+v: no time, or remote address wrong for its actor", e)
		}
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit log:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	// GET /v1/audit, for read tokens and `audit ls`.
	rec := call(t, a.Local(), "", "GET", "/v1/audit?since=1h", "")
	var listed []admin.AuditEntry
	if err := json.Unmarshal(rec.Body.Bytes(), &listed); err != nil || len(listed) != len(want) || listed[1].Action != "branch.create" {
		t.Errorf("GET /v1/audit: %d %v %s", rec.Code, err, rec.Body)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if rec := call(t, a.Local(), "", "GET", "/v1/audit?since="+future, ""); strings.TrimSpace(rec.Body.String()) != "[]" {
		t.Errorf("since an hour ahead: %s", rec.Body)
	}
	if rec := call(t, a.Local(), "", "GET", "/v1/audit?since=yesterday", ""); rec.Code != http.StatusBadRequest {
		t.Errorf("since=yesterday: %d, want 400", rec.Code)
	}
}

// A refused request's body does not grow the audit log by its size.
func TestAuditClipsTarget(t *testing.T) {
	t.Parallel()
	f := &fakeManager{}
	a, cat := newAPI(t, f, nil, "sixteen-chars-ok")
	long := strings.Repeat("é", 5000)
	call(t, a.Remote(), "sixteen-chars-ok", "POST", "/v1/branches", `{"name":"`+long+`","source":"app"}`)
	got, err := cat.Audit(context.Background(), time.Time{})
	if err != nil || len(got) != 1 {
		t.Fatalf("audit: %v %v", got, err)
	}
	if e := got[0]; len(e.Target) > 200 || len(e.Result) > 1100 || !utf8.ValidString(e.Target) || !utf8.ValidString(e.Result) {
		t.Errorf("entry kept %d bytes of target, %d of result", len(e.Target), len(e.Result))
	}
}

func TestParseSince(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Time{
		"":                     {},
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"90m":                  now.Add(-90 * time.Minute),
		"2026-11-30":           time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		"2026-11-30T17:00:00Z": time.Date(2026, 11, 30, 17, 0, 0, 0, time.UTC),
	} {
		if got, err := admin.ParseSince(v, now); err != nil || !got.Equal(want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"2026", "-1h", "soon"} {
		if _, err := admin.ParseSince(v, now); err == nil {
			t.Errorf("ParseSince(%q) took it", v)
		}
	}
}

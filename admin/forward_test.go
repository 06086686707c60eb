package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"go.uber.org/zap"
)

// TestFrontForwards: a front's API authenticates and checks the caller as a
// node's does, passes allowed requests on with the caller in headers (and not
// the caller's token), serves its own health, and audits only what it refused
// and what it could not pass on; the node's handler for fronts takes the
// caller from the headers, checks it
// again, audits it as "NAME via FRONT", and refuses a request from no front.
func TestFrontForwards(t *testing.T) {
	t.Parallel()
	f := &fakeManager{}
	node, cat := newAPI(t, f, nil, "")
	fromFront := true
	nodeH := node.Forwarded(func(*http.Request) (string, bool) { return "front-1", fromFront })
	var passed []*http.Request
	forward := func(rt admin.Route) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/branches/pr-9" {
				admin.FrontError(w, http.StatusServiceUnavailable, "no node is serving")
				return
			}
			out := httptest.NewRequest(r.Method, r.URL.String(), r.Body)
			out.Header = r.Header.Clone()
			admin.SetCaller(out, r)
			passed = append(passed, out)
			nodeH.ServeHTTP(w, out)
		}
	}
	fr, err := admin.NewFront(cat, nil, "sixteen-chars-ok", forward, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ci := mint(t, fr.Local(), "github", "ci", "pr-")
	h := fr.Remote()

	if rec := call(t, h, "", "GET", "/healthz", ""); rec.Code != 200 || len(passed) != 1 {
		t.Fatalf("healthz: %d, passed on %d requests (the token's creation only)", rec.Code, len(passed))
	}
	if rec := call(t, h, "wrong", "DELETE", "/v1/branches/pr-1", ""); rec.Code != http.StatusUnauthorized || len(passed) != 1 {
		t.Fatalf("a wrong token: %d, passed on %d", rec.Code, len(passed))
	}
	if rec := call(t, h, ci, "DELETE", "/v1/branches/main", ""); rec.Code != http.StatusForbidden || len(passed) != 1 {
		t.Fatalf("a ci token on another's branch: %d, passed on %d", rec.Code, len(passed))
	}
	if rec := call(t, h, ci, "DELETE", "/v1/branches/pr-1?source=app", ""); rec.Code != 200 {
		t.Fatalf("a ci token on its branch: %d %s", rec.Code, rec.Body)
	}
	last := passed[len(passed)-1]
	if last.Header.Get("Authorization") != "" || last.Header.Get("Pgbranch-Caller") != "github" || last.Header.Get("Pgbranch-Caller-Prefix") != "pr-" {
		t.Fatalf("passed on with headers %v", last.Header)
	}
	// The page's cookie holds the token: it stays at the front too.
	req := httptest.NewRequest("GET", "/v1/sources", nil)
	req.AddCookie(&http.Cookie{Name: "pgbranch_admin_token", Value: ci})
	req.Header.Set("Authorization", "Bearer "+ci)
	h.ServeHTTP(httptest.NewRecorder(), req)
	if last := passed[len(passed)-1]; last.Header.Get("Cookie") != "" || last.Header.Get("Authorization") != "" {
		t.Fatalf("passed on with headers %v", last.Header)
	}
	if len(f.calls) != 1 || f.calls[0] != "destroy app/pr-1" {
		t.Fatalf("the node's manager saw %q", f.calls)
	}

	if rec := call(t, h, ci, "DELETE", "/v1/branches/pr-9?source=app", ""); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("a request the front could not pass on: %d", rec.Code)
	}

	// A request that claims a caller the node would refuse is refused there too.
	forged := httptest.NewRequest("DELETE", "/v1/branches/main", nil)
	forged.Header.Set("Pgbranch-Caller", "github")
	forged.Header.Set("Pgbranch-Caller-Role", "ci")
	forged.Header.Set("Pgbranch-Caller-Prefix", "pr-")
	rec := httptest.NewRecorder()
	nodeH.ServeHTTP(rec, forged)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("the node served a ci caller on another's branch: %d", rec.Code)
	}
	fromFront = false
	if rec := call(t, nodeH, "", "GET", "/v1/branches", ""); rec.Code != http.StatusForbidden {
		t.Fatalf("the node's handler for fronts served no front: %d", rec.Code)
	}

	got, err := cat.Audit(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range got {
		lines = append(lines, e.Actor+" "+e.Action+" "+e.Target+" "+strings.Fields(e.Result)[0])
	}
	want := []string{
		"local via front-1 token.create github ok",
		"github branch.destroy main 403",
		"github via front-1 branch.destroy app/pr-1 ok",
		"github branch.destroy app/pr-9 503",
		"github via front-1 branch.destroy main 403",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit log:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

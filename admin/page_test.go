package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

func TestPageLocal(t *testing.T) {
	t.Parallel()
	f := &fakeManager{}
	h := admin.WithPage(local(t, f, nil), "127.0.0.1:6432")
	rec := do(t, h, http.MethodGet, "/", "")
	body := rec.Body.String()
	if rec.Code != 200 || !strings.Contains(body, `data-branch="b1"`) || !strings.Contains(body, "host=127.0.0.1 port=6432 user=postgres dbname=postgres@b1") {
		t.Fatalf("%d\n%s", rec.Code, body)
	}
	if rec := do(t, h, http.MethodGet, "/v1/branches", ""); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"b1"`) {
		t.Errorf("the API behind the page: %d %s", rec.Code, rec.Body)
	}

	form := url.Values{"source": {"app"}}.Encode()
	req := httptest.NewRequest(http.MethodPost, "/ui/branches/b1/destroy", strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || len(f.calls) != 0 {
		t.Fatalf("cross-site post: %d, calls %v", rec.Code, f.calls)
	}
	req = httptest.NewRequest(http.MethodPost, "/ui/branches/b1/destroy", strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther || len(f.calls) != 1 || f.calls[0] != "destroy app/b1" {
		t.Fatalf("destroy button: %d %q, calls %v", rec.Code, rec.Header().Get("Location"), f.calls)
	}
	if loc := rec.Header().Get("Location"); !strings.Contains(loc, "done=destroy+b1") {
		t.Errorf("redirect %q", loc)
	}
	// A name that needs escaping reaches the API as it is, not escaped twice.
	req = httptest.NewRequest(http.MethodPost, "/ui/branches/a%25b/destroy", strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if len(f.calls) != 2 || f.calls[1] != "destroy app/a%b" {
		t.Errorf("destroy of a%%b: calls %v", f.calls)
	}
}

func TestPageRemoteNeedsToken(t *testing.T) {
	t.Parallel()
	const token = "bootstrap-token-0123456789"
	a, _ := newAPI(t, &fakeManager{}, nil, token)
	h := admin.WithPage(a.Remote(), "127.0.0.1:6432")
	rec := do(t, h, http.MethodGet, "/", "")
	if body := rec.Body.String(); !strings.Contains(body, `name="token"`) || strings.Contains(body, `data-branch="b1"`) {
		t.Fatalf("without a token: %s", body)
	}
	if rec := do(t, h, http.MethodGet, "/ui/live", ""); rec.Code != http.StatusUnauthorized {
		t.Errorf("live part without a token: %d", rec.Code)
	}
	req := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader("token="+token))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/" || len(cookies) != 1 || !cookies[0].HttpOnly {
		t.Fatalf("login: %d %q %v", rec.Code, rec.Header().Get("Location"), cookies)
	}
	req = httptest.NewRequest(http.MethodGet, "/", nil)
	req.AddCookie(cookies[0])
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if !strings.Contains(rec.Body.String(), `data-branch="b1"`) {
		t.Fatalf("with the cookie: %s", rec.Body)
	}
}

// post sends the page's form to path as a browser with the token cookie would.
func post(t *testing.T, h http.Handler, token, path string, form url.Values) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if token != "" {
		req.AddCookie(&http.Cookie{Name: "pgbranch_admin_token", Value: token})
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("post %s: %d %s", path, rec.Code, rec.Body)
	}
	return rec
}

// get loads the page at the address a post redirected to.
func get(t *testing.T, h http.Handler, token, path string) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if token != "" {
		req.AddCookie(&http.Cookie{Name: "pgbranch_admin_token", Value: token})
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("get %s: %d %s", path, rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// auditLines is the audit log as "actor action target result" lines.
func auditLines(t *testing.T, cat *catalog.Catalog) []string {
	t.Helper()
	got, err := cat.Audit(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range got {
		lines = append(lines, strings.Join([]string{e.Actor, e.Action, e.Target, e.Result}, " "))
	}
	return lines
}

// TestPageForce: a button refused for the branch's open sessions comes back with
// the error and a button that repeats the action with force=true, without
// JavaScript (a form post); the audit log records that one as --force.
func TestPageForce(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"reset", "stop", "destroy"} {
		t.Run(action, func(t *testing.T) {
			t.Parallel()
			f := &fakeManager{sessions: 2}
			a, cat := newAPI(t, f, nil, "")
			h := admin.WithPage(a.Local(), "127.0.0.1:6432")

			rec := post(t, h, "", "/ui/branches/b1/"+action, url.Values{"source": {"app"}})
			loc, _ := url.Parse(rec.Header().Get("Location"))
			q := loc.Query()
			if !strings.Contains(q.Get("error"), "open sessions") || q.Get("busy") != action || q.Get("branch") != "b1" || q.Get("source") != "app" {
				t.Fatalf("refused %s: redirect %q", action, loc)
			}
			body := get(t, h, "", loc.String())
			form := `<form method="post" action="/ui/branches/b1/` + action + `"><input type="hidden" name="source" value="app"><input type="hidden" name="force" value="true">`
			if !strings.Contains(body, form) || !strings.Contains(body, ">end 2 sessions and "+action+"</button>") ||
				!strings.Contains(body, "branch has open sessions (2)") {
				t.Fatalf("page after the refusal:\n%s", body)
			}
			// The live part, which the script reloads every few seconds, leaves
			// the error and its button alone.
			if live := get(t, h, "", "/ui/live?"+loc.RawQuery); strings.Contains(live, "open sessions") || strings.Contains(live, `name="force"`) {
				t.Errorf("live part holds the refusal:\n%s", live)
			}
			if body := get(t, h, "", "/"); strings.Contains(body, `name="force"`) {
				t.Errorf("force button without a refusal:\n%s", body)
			}

			rec = post(t, h, "", "/ui/branches/b1/"+action, url.Values{"source": {"app"}, "force": {"true"}})
			if loc := rec.Header().Get("Location"); !strings.Contains(loc, "done="+action+"+--force+b1") || strings.Contains(loc, "busy=") {
				t.Errorf("forced %s: redirect %q", action, loc)
			}
			want := []string{action + " app/b1", action + " --force app/b1"}
			if strings.Join(f.calls, ",") != strings.Join(want, ",") {
				t.Errorf("calls %q, want %q", f.calls, want)
			}
			lines := auditLines(t, cat)
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "local branch."+action+" app/b1 409 ") ||
				lines[1] != "local branch."+action+" --force app/b1 ok" {
				t.Errorf("audit log:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
}

// TestPageForceOffer: the button is offered only for a branch the page lists, and
// says so when the sessions ended since the refusal.
func TestPageForceOffer(t *testing.T) {
	t.Parallel()
	f := &fakeManager{}
	h := admin.WithPage(local(t, f, nil), "127.0.0.1:6432")
	for _, tc := range []struct{ query, want string }{
		{"busy=reset&branch=b1&source=app", ">reset now</button>"},
		{"busy=destroy&branch=b1", ">destroy now</button>"},
		{"busy=reset&branch=gone&source=app", ""},
		{"busy=reset&branch=b1&source=other", ""},
		{"busy=create&branch=b1&source=app", ""},
	} {
		body := get(t, h, "", "/?error=x&"+tc.query)
		if has := strings.Contains(body, `name="force"`); has != (tc.want != "") || tc.want != "" && !strings.Contains(body, tc.want) {
			t.Errorf("%s: want %q in\n%s", tc.query, tc.want, body)
		}
	}
}

// TestPageForceCI: a ci token may end the sessions of a branch under its prefix
// on a reset or destroy, as through the API, and no more: stop stays refused
// (403, no force offered), as does a branch outside its prefix.
func TestPageForceCI(t *testing.T) {
	t.Parallel()
	f := &fakeManager{sessions: 1, list: []string{"pr-1"}}
	a, cat := newAPI(t, f, nil, "sixteen-chars-ok")
	ci := mint(t, a.Local(), "github", "ci", "pr-")
	h := admin.WithPage(a.Remote(), "127.0.0.1:6432")

	rec := post(t, h, ci, "/ui/branches/pr-1/reset", url.Values{"source": {"app"}})
	loc := rec.Header().Get("Location")
	if body := get(t, h, ci, loc); !strings.Contains(body, ">end 1 session and reset</button>") {
		t.Fatalf("ci reset refused for its session: %q\n%s", loc, body)
	}
	post(t, h, ci, "/ui/branches/pr-1/reset", url.Values{"source": {"app"}, "force": {"true"}})
	rec = post(t, h, ci, "/ui/branches/pr-1/stop", url.Values{"source": {"app"}, "force": {"true"}})
	if loc := rec.Header().Get("Location"); !strings.Contains(loc, "may+not") || strings.Contains(loc, "busy=") {
		t.Errorf("ci stop: redirect %q", loc)
	}
	post(t, h, ci, "/ui/branches/main/destroy", url.Values{"source": {"app"}, "force": {"true"}})
	if want := []string{"reset app/pr-1", "reset --force app/pr-1"}; strings.Join(f.calls, ",") != strings.Join(want, ",") {
		t.Errorf("calls %q, want %q", f.calls, want)
	}
	lines := auditLines(t, cat)
	want := []string{
		"local token.create github ok",
		"github branch.reset app/pr-1 409 ",
		"github branch.reset --force app/pr-1 ok",
		"github branch.stop --force app/pr-1 403 ",
		"github branch.destroy --force app/main 403 ",
	}
	if len(lines) != len(want) {
		t.Fatalf("audit log:\n%s", strings.Join(lines, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("audit line %d: %q, want %q...", i, lines[i], want[i])
		}
	}
}

package admin_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
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

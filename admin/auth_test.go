package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"go.uber.org/zap"
)

// call does one request with a bearer token ("" for none).
func call(t *testing.T, h http.Handler, token, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// mint makes a token through the admin socket's handler and returns its secret.
func mint(t *testing.T, localH http.Handler, name, role, prefix string) string {
	t.Helper()
	body, _ := json.Marshal(admin.NewToken{Name: name, Role: role, Prefix: prefix})
	rec := call(t, localH, "", http.MethodPost, "/v1/tokens", string(body))
	var ct admin.CreatedToken
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &ct) != nil || !strings.HasPrefix(ct.Token, admin.TokenPrefix) {
		t.Fatalf("token create %s: %d %s", name, rec.Code, rec.Body)
	}
	return ct.Token
}

func TestRolePermissions(t *testing.T) {
	t.Parallel()
	a, _ := newAPI(t, &fakeManager{}, http.NotFoundHandler(), "")
	h := a.Remote()
	tokens := map[string]string{
		"admin": mint(t, a.Local(), "ops", "admin", ""),
		"ci":    mint(t, a.Local(), "github", "ci", "pr-"),
		"read":  mint(t, a.Local(), "grafana", "read", ""),
	}
	for _, tc := range []struct {
		method, path, body string
		admin, ci, read    int
	}{
		{"GET", "/v1/branches", "", 200, 200, 200},
		{"GET", "/v1/info", "", 200, 200, 200},
		{"GET", "/v1/sources", "", 200, 200, 200},
		{"GET", "/metrics", "", 404, 403, 404}, // allowed: the metrics handler here answers 404
		{"GET", "/v1/audit", "", 200, 403, 200},
		{"GET", "/v1/nodes", "", 200, 403, 200},
		{"GET", "/v1/tokens", "", 200, 403, 403},
		{"POST", "/v1/branches", `{"name":"pr-1"}`, 200, 200, 403},
		{"POST", "/v1/branches", `{"name":"pr-2","from":"pr-1"}`, 200, 200, 403},
		{"POST", "/v1/branches", `{"name":"pr-3","from":"main"}`, 200, 403, 403},
		{"POST", "/v1/branches", `{"name":"main"}`, 200, 403, 403},
		{"POST", "/v1/branches", `{"name":"xpr-1"}`, 200, 403, 403},
		{"POST", "/v1/branches", `{not json`, 400, 403, 403},
		{"POST", "/v1/branches/pr-1/reset", "", 200, 200, 403},
		{"POST", "/v1/branches/main/reset", "", 200, 403, 403},
		{"POST", "/v1/branches/pr-1/stop", "", 200, 403, 403},
		{"PATCH", "/v1/branches/pr-1", `{"ttl":1}`, 200, 403, 403},
		{"DELETE", "/v1/branches/pr-1", "", 200, 200, 403},
		{"DELETE", "/v1/branches/staging", "", 200, 403, 403},
		{"DELETE", "/v1/sources/app", "", 200, 403, 403},
		{"POST", "/v1/tokens", `{"name":"x","role":"read"}`, 200, 403, 403},
		{"DELETE", "/v1/tokens/x", "", 200, 403, 403},
	} {
		for _, role := range []string{"admin", "ci", "read"} {
			want := map[string]int{"admin": tc.admin, "ci": tc.ci, "read": tc.read}[role]
			if rec := call(t, h, tokens[role], tc.method, tc.path, tc.body); rec.Code != want {
				t.Errorf("%s %s %s as %s: %d, want %d (%s)", tc.method, tc.path, tc.body, role, rec.Code, want, strings.TrimSpace(rec.Body.String()))
			}
		}
	}
}

func TestCIListsOnlyItsBranches(t *testing.T) {
	t.Parallel()
	f := &fakeManager{list: []string{"main", "pr-1", "pr-22", "staging"}}
	a, _ := newAPI(t, f, nil, "")
	ci := mint(t, a.Local(), "github", "ci", "pr-")
	for token, want := range map[string]string{ci: "pr-1,pr-22", mint(t, a.Local(), "grafana", "read", ""): "main,pr-1,pr-22,staging"} {
		rec := call(t, a.Remote(), token, "GET", "/v1/branches", "")
		var got []struct{ Name string }
		json.Unmarshal(rec.Body.Bytes(), &got)
		var names []string
		for _, b := range got {
			names = append(names, b.Name)
		}
		if strings.Join(names, ",") != want {
			t.Errorf("list: %v, want %s", names, want)
		}
	}
}

// TestCISeesOnlyItsBranchesAsFrom: the sources list says which branch a source was
// seeded from; a ci token, shown no branch outside its prefix, is not told one there.
func TestCISeesOnlyItsBranchesAsFrom(t *testing.T) {
	t.Parallel()
	f := &fakeManager{sources: []branches.SourceInfo{{Name: "app"}, {Name: "incident", From: "app/incident-42"},
		{Name: "pr-tpl", From: "app/pr-9"}}}
	a, _ := newAPI(t, f, nil, "")
	ci := mint(t, a.Local(), "github", "ci", "pr-")
	for token, want := range map[string]string{ci: ",,app/pr-9", mint(t, a.Local(), "grafana", "read", ""): ",app/incident-42,app/pr-9"} {
		rec := call(t, a.Remote(), token, "GET", "/v1/sources", "")
		var got []struct{ From string }
		json.Unmarshal(rec.Body.Bytes(), &got)
		var from []string
		for _, s := range got {
			from = append(from, s.From)
		}
		if strings.Join(from, ",") != want {
			t.Errorf("from: %q, want %s", from, want)
		}
	}
}

func TestRevokedTokenStopsAtOnce(t *testing.T) {
	t.Parallel()
	a, _ := newAPI(t, &fakeManager{}, nil, "")
	h := a.Remote()
	tok := mint(t, a.Local(), "github", "ci", "pr-")
	if rec := call(t, h, tok, "DELETE", "/v1/branches/pr-1", ""); rec.Code != 200 {
		t.Fatalf("before revoking: %d", rec.Code)
	}
	if rec := call(t, a.Local(), "", "DELETE", "/v1/tokens/github", ""); rec.Code != 200 {
		t.Fatalf("token rm: %d %s", rec.Code, rec.Body)
	}
	if rec := call(t, h, tok, "DELETE", "/v1/branches/pr-1", ""); rec.Code != 401 {
		t.Errorf("after revoking: %d, want 401", rec.Code)
	}
	if rec := call(t, a.Local(), "", "DELETE", "/v1/tokens/github", ""); rec.Code != 404 {
		t.Errorf("second token rm: %d, want 404", rec.Code)
	}
}

func TestTokenRequests(t *testing.T) {
	t.Parallel()
	a, _ := newAPI(t, &fakeManager{}, nil, "sixteen-chars-ok")
	h := a.Local()
	mint(t, h, "ops", "admin", "")
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"name":"ops","role":"admin"}`, 409},
		{`{"name":"local","role":"admin"}`, 400},
		{`{"name":"bootstrap","role":"admin"}`, 400},
		{`{"name":"Ops","role":"admin"}`, 400},
		{`{"name":"-x","role":"admin"}`, 400},
		{`{"name":"","role":"admin"}`, 400},
		{`{"name":"a b","role":"admin"}`, 400},
		{`{"name":"x","role":"root"}`, 400},
		{`{"name":"x","role":"ci"}`, 400},
		{`{"name":"x","role":"ci","prefix":"PR/"}`, 400},
		{`{"name":"x","role":"read","prefix":"pr-"}`, 400},
		{`{"name":"ci.main_2","role":"ci","prefix":"pr-"}`, 200},
	} {
		if rec := call(t, h, "", "POST", "/v1/tokens", tc.body); rec.Code != tc.want {
			t.Errorf("%s: %d, want %d (%s)", tc.body, rec.Code, tc.want, rec.Body)
		}
	}
	rec := call(t, h, "", "GET", "/v1/tokens", "")
	var got []admin.TokenInfo
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Name != "bootstrap" || !got[0].Flag || got[1].Name != "ci.main_2" || got[1].Prefix != "pr-" || got[2].Name != "ops" {
		t.Errorf("token ls: %+v", got)
	}
	if strings.Contains(rec.Body.String(), "hash") || strings.Contains(rec.Body.String(), admin.TokenPrefix) {
		t.Errorf("token ls shows secrets: %s", rec.Body)
	}
	if rec := call(t, h, "", "DELETE", "/v1/tokens/bootstrap", ""); rec.Code != 400 {
		t.Errorf("removing the bootstrap token: %d, want 400", rec.Code)
	}
}

// failingStore is a Store whose token reads fail.
type failingStore struct{ admin.Store }

func (failingStore) Tokens(context.Context) ([]catalog.Token, error) {
	return nil, errors.New("disk I/O error")
}

func TestUnreadableTokens(t *testing.T) {
	t.Parallel()
	_, cat := newAPI(t, &fakeManager{}, nil, "")
	a, err := admin.New(admin.Config{Manager: &fakeManager{}, Store: failingStore{cat}, Bootstrap: "sixteen-chars-ok"}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if rec := call(t, a.Remote(), "pgbp_whatever", "GET", "/v1/branches", ""); rec.Code != 503 {
		t.Errorf("unreadable tokens: %d, want 503", rec.Code)
	}
	if rec := call(t, a.Remote(), "sixteen-chars-ok", "GET", "/v1/branches", ""); rec.Code != 200 {
		t.Errorf("bootstrap token with unreadable tokens: %d, want 200", rec.Code)
	}
}

func TestSecretsAreFresh(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		s, err := admin.NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		if seen[s] || len(s) != len(admin.TokenPrefix)+43 {
			t.Fatalf("secret %q (repeated: %v)", s, seen[s])
		}
		seen[s] = true
	}
	if string(admin.HashSecret("a")) == string(admin.HashSecret("b")) || len(admin.HashSecret("a")) != 32 {
		t.Error("HashSecret is not SHA-256")
	}
}

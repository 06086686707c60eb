package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"go.uber.org/zap"
)

// fakeManager answers every call with err (nil: success) and records the calls.
type fakeManager struct {
	err   error
	calls []string
}

func (f *fakeManager) AddSource(_ context.Context, req branches.SourceRequest, progress func(string)) (branches.SourceInfo, error) {
	progress("step one")
	progress("step two")
	f.calls = append(f.calls, "add "+req.Name)
	return branches.SourceInfo{Name: req.Name, Generation: 1}, f.err
}
func (f *fakeManager) RefreshSource(_ context.Context, name string, progress func(string)) (branches.SourceInfo, error) {
	f.calls = append(f.calls, "refresh "+name)
	return branches.SourceInfo{Name: name, Generation: 2}, f.err
}
func (f *fakeManager) RemoveSource(_ context.Context, name string) error {
	f.calls = append(f.calls, "rm "+name)
	return f.err
}
func (f *fakeManager) Sources() []branches.SourceInfo { return []branches.SourceInfo{{Name: "app"}} }
func (f *fakeManager) List() []branches.Info          { return []branches.Info{{Name: "b1", Source: "app"}} }
func (f *fakeManager) Create(_ context.Context, name string, o branches.CreateOptions) error {
	f.calls = append(f.calls, fmt.Sprintf("create %s from=%s ttl=%s", name, o.From, o.TTL))
	return f.err
}
func (f *fakeManager) Reset(_ context.Context, source, name string) error {
	f.calls = append(f.calls, "reset "+source+"/"+name)
	return f.err
}
func (f *fakeManager) Destroy(_ context.Context, source, name string) error {
	f.calls = append(f.calls, "destroy "+source+"/"+name)
	return f.err
}
func (f *fakeManager) Stop(_ context.Context, source, name string) error {
	f.calls = append(f.calls, "stop "+source+"/"+name)
	return f.err
}
func (f *fakeManager) Set(_ context.Context, source, name string, s branches.Settings) error {
	f.calls = append(f.calls, fmt.Sprintf("set %s ttl=%v", name, *s.TTL))
	return f.err
}
func (f *fakeManager) Info() branches.ServerInfo { return branches.ServerInfo{CopyUpMode: "copy"} }

func do(t *testing.T, h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestStatusMapping(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 200},
		{fmt.Errorf("branch x: %w", branches.ErrNotFound), 404},
		{fmt.Errorf("x: %w", branches.ErrExists), 409},
		{fmt.Errorf("x: %w", branches.ErrBusy), 409},
		{fmt.Errorf("x: %w", branches.ErrInvalid), 400},
		{branches.ErrClosed, 503},
		{fmt.Errorf("x: %w", branches.ErrDiskFull), 503},
		{errors.New("mount failed"), 500},
	} {
		f := &fakeManager{err: tc.err}
		h := admin.Handler(f, nil, zap.NewNop())
		rec := do(t, h, http.MethodDelete, "/v1/branches/b1?source=app", "")
		if rec.Code != tc.want {
			t.Errorf("%v: status %d, want %d", tc.err, rec.Code, tc.want)
		}
		if tc.err != nil {
			var e admin.Error
			if json.Unmarshal(rec.Body.Bytes(), &e); e.Error == "" {
				t.Errorf("%v: no error in body %q", tc.err, rec.Body)
			}
		}
		if len(f.calls) != 1 || f.calls[0] != "destroy app/b1" {
			t.Errorf("calls %v", f.calls)
		}
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	f := &fakeManager{}
	h := admin.Handler(f, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("metrics")) }), zap.NewNop())
	for _, tc := range []struct{ method, path, body, call string }{
		{http.MethodPost, "/v1/branches", `{"name":"n1","from":"p","ttl":3600000000000}`, "create n1 from=p ttl=1h0m0s"},
		{http.MethodPost, "/v1/branches/n1/reset", "", "reset /n1"},
		{http.MethodPost, "/v1/branches/n1/stop?source=s", "", "stop s/n1"},
		{http.MethodPatch, "/v1/branches/n1", `{"ttl":60000000000}`, "set n1 ttl=1m0s"},
		{http.MethodDelete, "/v1/sources/app", "", "rm app"},
	} {
		f.calls = nil
		if rec := do(t, h, tc.method, tc.path, tc.body); rec.Code != 200 || len(f.calls) != 1 || f.calls[0] != tc.call {
			t.Errorf("%s %s: %d %v, want call %q", tc.method, tc.path, rec.Code, f.calls, tc.call)
		}
	}
	if rec := do(t, h, http.MethodPost, "/v1/branches", `{not json`); rec.Code != 400 {
		t.Errorf("bad JSON: %d", rec.Code)
	}
	if rec := do(t, h, http.MethodGet, "/metrics", ""); rec.Body.String() != "metrics" {
		t.Errorf("metrics: %q", rec.Body)
	}
	if rec := do(t, h, http.MethodGet, "/healthz", ""); rec.Code != 200 {
		t.Errorf("healthz: %d", rec.Code)
	}
}

func TestSourceAddStreamsProgress(t *testing.T) {
	t.Parallel()
	for _, fail := range []bool{false, true} {
		f := &fakeManager{}
		if fail {
			f.err = errors.New("psql failed: syntax error")
		}
		h := admin.Handler(f, nil, zap.NewNop())
		rec := do(t, h, http.MethodPost, "/v1/sources", `{"name":"app","kind":"empty"}`)
		var lines []admin.Progress
		sc := bufio.NewScanner(rec.Body)
		for sc.Scan() {
			var p admin.Progress
			if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, p)
		}
		if len(lines) != 3 || lines[0].Progress != "step one" || lines[1].Progress != "step two" {
			t.Fatalf("lines %+v", lines)
		}
		last := lines[2]
		if fail && (last.Error == "" || last.Source != nil) || !fail && (last.Source == nil || last.Source.Name != "app") {
			t.Errorf("fail=%v: last line %+v", fail, last)
		}
	}
}

func TestRequireToken(t *testing.T) {
	t.Parallel()
	h := admin.RequireToken("sixteen-chars-ok", admin.Handler(&fakeManager{}, nil, zap.NewNop()))
	for _, tc := range []struct {
		path, auth string
		want       int
	}{
		{"/healthz", "", 200},
		{"/v1/branches", "", 401},
		{"/v1/branches", "Bearer wrong", 401},
		{"/v1/branches", "sixteen-chars-ok", 401},
		{"/v1/branches", "Bearer sixteen-chars-ok", 200},
	} {
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s with %q: %d, want %d", tc.path, tc.auth, rec.Code, tc.want)
		}
	}
}

package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"go.uber.org/zap"
)

// fakeManager answers every call with err (nil: success) and records the calls.
type fakeManager struct {
	err   error
	calls []string
	list  []string // branch names List returns (default: b1)
	// sessions is every listed branch's open sessions: a reset, stop or destroy
	// without Force is refused (ErrBusy) while it is not 0, as Manager does.
	sessions int
	sources  []branches.SourceInfo // what Sources returns (default: app)
}

// op records a reset, stop or destroy and answers it.
func (f *fakeManager) op(what, source, name string, o branches.OpOptions) error {
	call := what + " " + source + "/" + name
	if o.Force {
		call = what + " --force " + source + "/" + name
	}
	f.calls = append(f.calls, call)
	if f.sessions > 0 && !o.Force {
		return fmt.Errorf("branch %q: %w (%d)", name, branches.ErrBusy, f.sessions)
	}
	return f.err
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
func (f *fakeManager) Sources() []branches.SourceInfo {
	if f.sources != nil {
		return slices.Clone(f.sources)
	}
	return []branches.SourceInfo{{Name: "app"}}
}
func (f *fakeManager) List() []branches.Info {
	if f.list == nil {
		return []branches.Info{{Name: "b1", Source: "app", Sessions: f.sessions}}
	}
	var out []branches.Info
	for _, n := range f.list {
		out = append(out, branches.Info{Name: n, Source: "app", Sessions: f.sessions})
	}
	return out
}
func (f *fakeManager) ListAll() []branches.Info {
	return []branches.Info{{Name: "_pool-1", Source: "app", State: "pooled"}, {Name: "b1", Source: "app"}}
}
func (f *fakeManager) SetWarm(_ context.Context, source string, warm int) error {
	f.calls = append(f.calls, fmt.Sprintf("warm %s %d", source, warm))
	return f.err
}
func (f *fakeManager) HoldWarm(_ context.Context, source string, warm int, ttl time.Duration) (string, error) {
	f.calls = append(f.calls, fmt.Sprintf("hold %s %d for %s", source, warm, ttl))
	return "h1", f.err
}
func (f *fakeManager) ReleaseWarm(_ context.Context, source, id string) error {
	f.calls = append(f.calls, fmt.Sprintf("release %s %s", source, id))
	return f.err
}
func (f *fakeManager) Create(_ context.Context, name string, o branches.CreateOptions) error {
	f.calls = append(f.calls, fmt.Sprintf("create %s from=%s ttl=%s", name, o.From, o.TTL))
	return f.err
}
func (f *fakeManager) Reset(_ context.Context, source, name string, o branches.OpOptions) error {
	return f.op("reset", source, name, o)
}
func (f *fakeManager) Destroy(_ context.Context, source, name string, o branches.OpOptions) error {
	return f.op("destroy", source, name, o)
}
func (f *fakeManager) SetDraining(context.Context, string, bool) error { return nil }

func (f *fakeManager) Nodes(context.Context) ([]branches.NodeInfo, error) {
	return []branches.NodeInfo{{ID: "n1", Slot: 1, Epoch: 3, State: "active"}}, f.err
}
func (f *fakeManager) Stop(_ context.Context, source, name string, o branches.OpOptions) error {
	return f.op("stop", source, name, o)
}
func (f *fakeManager) Set(_ context.Context, source, name string, s branches.Settings) error {
	f.calls = append(f.calls, fmt.Sprintf("set %s ttl=%v", name, *s.TTL))
	return f.err
}
func (f *fakeManager) Info() branches.ServerInfo { return branches.ServerInfo{CopyUpMode: "copy"} }

// newAPI returns an API over f and a fresh catalog, with bootstrap as its --admin-token.
func newAPI(t *testing.T, f *fakeManager, metrics http.Handler, bootstrap string) (*admin.API, *catalog.Catalog) {
	t.Helper()
	cat, err := catalog.Open(filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	a, err := admin.New(admin.Config{Manager: f, Store: cat, Metrics: metrics, Bootstrap: bootstrap}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return a, cat
}

// local is the admin socket's handler over f.
func local(t *testing.T, f *fakeManager, metrics http.Handler) http.Handler {
	t.Helper()
	a, _ := newAPI(t, f, metrics, "")
	return a.Local()
}

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
		{fmt.Errorf("x: %w: unmount failed", branches.ErrNotGone), 503},
		{errors.New("mount failed"), 500},
	} {
		f := &fakeManager{err: tc.err}
		h := local(t, f, nil)
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
	h := local(t, f, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("metrics")) }))
	for _, tc := range []struct{ method, path, body, call string }{
		{http.MethodPost, "/v1/branches", `{"name":"n1","from":"p","ttl":"1h"}`, "create n1 from=p ttl=1h0m0s"},
		{http.MethodPost, "/v1/branches/n1/reset", "", "reset /n1"},
		{http.MethodPost, "/v1/branches/n1/stop?source=s", "", "stop s/n1"},
		{http.MethodPatch, "/v1/branches/n1", `{"ttl":60}`, "set n1 ttl=1m0s"},
		{http.MethodPost, "/v1/sources/app/holds", `{"warm":6,"ttl":"30m"}`, "hold app 6 for 30m0s"},
		{http.MethodDelete, "/v1/sources/app/holds/h1", "", "release app h1"},
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
		h := local(t, f, nil)
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
		if fail && (last.Error == "" || last.Source != nil || last.Status != 500) || !fail && (last.Source == nil || last.Source.Name != "app") {
			t.Errorf("fail=%v: last line %+v", fail, last)
		}
	}
}

// A build refused before its first progress line is answered with its status, as
// any request is: the CLI's exit code tells a missing or existing source.
func TestSourceBuildRefusedEarly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("source %q: %w", "nosuch", branches.ErrNotFound), http.StatusNotFound},
		{fmt.Errorf("source %q: %w", "app", branches.ErrExists), http.StatusConflict},
	} {
		h := local(t, &fakeManager{err: tc.err}, nil)
		rec := do(t, h, http.MethodPost, "/v1/sources/nosuch/refresh", "")
		var e admin.Error
		if rec.Code != tc.want || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error != tc.err.Error() {
			t.Errorf("refresh failing with %v: %d %q, want %d and the error", tc.err, rec.Code, rec.Body.String(), tc.want)
		}
	}
}

func TestBootstrapToken(t *testing.T) {
	t.Parallel()
	a, _ := newAPI(t, &fakeManager{}, nil, "sixteen-chars-ok")
	h := a.Remote()
	for _, tc := range []struct {
		path, auth string
		want       int
	}{
		{"/healthz", "", 200},
		{"/v1/branches", "", 401},
		{"/v1/branches", "Bearer ", 401},
		{"/v1/branches", "Bearer wrong", 401},
		{"/v1/branches", "sixteen-chars-ok", 401},
		{"/v1/branches", "Bearer sixteen-chars-okx", 401},
		{"/v1/branches", "Bearer sixteen-chars-ok", 200},
		{"/v1/branches", "bearer sixteen-chars-ok", 200},
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
		if rec.Code == 401 && rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s with %q: 401 without WWW-Authenticate", tc.path, tc.auth)
		}
	}
}

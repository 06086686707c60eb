package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/pgbranchproxy/pgbranchproxy/branches"
)

func (f *fakeManager) Diff(_ context.Context, name string, o branches.DiffOptions) (branches.DiffResult, error) {
	f.calls = append(f.calls, fmt.Sprintf("diff %s source=%s against=%s data=%v", name, o.Source, o.Against, o.Data))
	return branches.DiffResult{Branch: name, Against: o.Against, Schema: "+x\n"}, f.err
}

func TestDiffRoute(t *testing.T) {
	t.Parallel()
	f := &fakeManager{}
	h := local(t, f, nil)
	rec := do(t, h, http.MethodGet, "/v1/branches/b1/diff?source=app&against=b2&data=1", "")
	var res branches.DiffResult
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &res) != nil || res.Schema != "+x\n" {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if len(f.calls) != 1 || f.calls[0] != "diff b1 source=app against=b2 data=true" {
		t.Errorf("calls %v", f.calls)
	}
	f = &fakeManager{err: fmt.Errorf("branch x: %w", branches.ErrNotFound)}
	rec = do(t, local(t, f, nil), http.MethodGet, "/v1/branches/x/diff", "")
	var e admin.Error
	if rec.Code != 404 || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error == "" {
		t.Errorf("missing branch: %d %s", rec.Code, rec.Body)
	}
}

package admin_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
)

func TestWarmPoolRoutes(t *testing.T) {
	t.Parallel()
	f := &fakeManager{}
	h := local(t, f, nil)
	for path, want := range map[string]int{"/v1/branches": 1, "/v1/branches?all=true": 2} {
		var got []branches.Info
		rec := do(t, h, http.MethodGet, path, "")
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || len(got) != want {
			t.Errorf("GET %s: %d branches (%v), want %d", path, len(got), err, want)
		}
	}
	if rec := do(t, h, http.MethodPatch, "/v1/sources/app", `{"warm": 5}`); rec.Code != 200 {
		t.Fatalf("PATCH warm: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, h, http.MethodPatch, "/v1/sources/app", `{}`); rec.Code != 400 {
		t.Fatalf("PATCH without warm: %d, want 400", rec.Code)
	}
	if len(f.calls) != 1 || f.calls[0] != "warm app 5" {
		t.Fatalf("calls %v", f.calls)
	}
}

package pgbranchtest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
)

// TestOldTemplatesRemoved: once the template of the source's current seed
// generation exists, a test binary removes the templates that earlier generations
// of that source left (any hash, any database), once; not the current
// generation's other templates, not another source's, not a source seeded from
// an ordinary branch, and a template the server will not remove yet (a branch
// uses it) is no error.
func TestOldTemplatesRemoved(t *testing.T) {
	const source = "oldtpl"
	current := templateName(source, 3, "app", "h")
	tpl := func(src string, g int, db, hash string) sourceInfo {
		n := templateName(src, g, db, hash)
		return sourceInfo{Name: n, Generation: 1, From: src + "/" + n}
	}
	old := []sourceInfo{tpl(source, 2, "app", "h"), tpl(source, 1, "app", "other"), tpl(source, 2, "db2", "h")}
	busy := tpl(source, 1, "app", "busy")
	keep := []sourceInfo{{Name: source, Generation: 3}, tpl(source, 3, "app", "h"), tpl(source, 3, "app", "other"),
		tpl("crm", 1, "crm", "h"), {Name: "pgbt-mine-g1", From: source + "/feature"}}
	all := slices.Concat(keep, old, []sourceInfo{busy})

	var mu sync.Mutex
	var removed []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/sources":
			json.NewEncoder(w).Encode(all)
		case r.Method == http.MethodDelete:
			name, _ := url.PathUnescape(r.URL.Path[len("/v1/sources/"):])
			if name == busy.Name {
				w.WriteHeader(http.StatusConflict)
				json.NewEncoder(w).Encode(map[string]string{"error": "source has 1 branches"})
				return
			}
			mu.Lock()
			removed = append(removed, name)
			mu.Unlock()
			w.Write([]byte("{}"))
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()

	admin := newAdminClient(srv.URL, "")
	base, _ := url.Parse("postgres://u@127.0.0.1:1/app")
	migrate := func(context.Context, string) error { t.Error("migrated: the template exists"); return nil }
	for range 2 {
		got, err := ensureTemplate(context.Background(), admin, base, "app", source, migrate, "h")
		if err != nil || got != current {
			t.Fatalf("ensureTemplate = %q, %v; want %q", got, err, current)
		}
	}
	var want []string
	for _, s := range old {
		want = append(want, s.Name)
	}
	slices.Sort(want)
	slices.Sort(removed)
	if !slices.Equal(removed, want) {
		t.Errorf("removed %q, want the older generations' templates %q, once", removed, want)
	}
}

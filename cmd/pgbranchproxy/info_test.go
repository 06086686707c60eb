package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// info prints the role /v1/info gives the caller (its token's), which tells an
// operator what the token in use may do.
func TestInfoShowsRole(t *testing.T) {
	for _, role := range []string{"admin", "ci", "read"} {
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/info" {
				http.Error(w, `{"error":"not here"}`, http.StatusNotFound)
				return
			}
			json.NewEncoder(w).Encode(map[string]any{"state_dir": "/srv/state", "listen": "127.0.0.1:6432", "role": role})
		}))
		var out bytes.Buffer
		root := newRoot()
		root.SetOut(&out)
		root.SetArgs([]string{"--admin-url", api.URL, "--admin-token", "t", "info"})
		if err := root.Execute(); err != nil {
			t.Fatalf("info: %v", err)
		}
		api.Close()
		var got struct {
			Role, Listen string
		}
		if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Role != role || got.Listen != "127.0.0.1:6432" {
			t.Errorf("info with role %s printed (%v):\n%s", role, err, out.String())
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"go.uber.org/zap"
)

// TestFrontAdminSocket: a front takes its state directory's lock, so that it
// is refused a directory a node (or another front) holds; without a directory
// it can make, it serves without an admin socket.
func TestFrontAdminSocket(t *testing.T) {
	dir := t.TempDir()
	sock, unlock, err := frontAdminSocket(dir, zap.NewNop())
	if err != nil || sock != filepath.Join(dir, "admin.sock") {
		t.Fatalf("a free directory: %q %v", sock, err)
	}
	if _, _, err := frontAdminSocket(dir, zap.NewNop()); !errors.Is(err, branches.ErrStateDirInUse) {
		t.Fatalf("a held directory: %v, want ErrStateDirInUse", err)
	}
	unlock()
	sock, _, err = frontAdminSocket("/proc/no-such-dir", zap.NewNop())
	if err != nil || sock != "" {
		t.Fatalf("a directory that cannot be made: %q %v, want no socket and no error", sock, err)
	}
}

// TestFrontRefusesHolds: a warm-pool hold is one node's, so a front refuses it
// (501) rather than pass it to a node at random; pgbranchtest.Warm then sets the
// source's warm setting instead.
func TestFrontRefusesHolds(t *testing.T) {
	fw := &nodeForwarder{}
	for _, pattern := range []string{"POST /v1/sources/{name}/holds", "DELETE /v1/sources/{name}/holds/{id}"} {
		rec := httptest.NewRecorder()
		fw.forward(admin.Route{Pattern: pattern})(rec, httptest.NewRequest(http.MethodPost, "/v1/sources/app/holds", nil))
		if rec.Code != http.StatusNotImplemented {
			t.Errorf("%s through a front: %d, want 501", pattern, rec.Code)
		}
	}
}

// TestFrontAnswersNodesAndInfo: through a front, node ls marks no node as
// "this server" (node drain without an id would drain whichever node answered),
// and info names the caller's role, as a node's does, so that info with a ci
// token does not ask for /metrics and leave a refusal in the audit log.
func TestFrontAnswersNodesAndInfo(t *testing.T) {
	ctx := context.Background()
	cat, err := catalog.Open(filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if _, err := cat.Register(ctx, "node-1", "127.0.0.1:7432", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := cat.AddToken(ctx, catalog.Token{Name: "github", Role: admin.RoleCI, Prefix: "pr-", Hash: admin.HashSecret("pgbp_ci-secret")}); err != nil {
		t.Fatal(err)
	}
	fw := &nodeForwarder{cat: cat, stateDir: "/run/front", listen: "127.0.0.1:6432", log: zap.NewNop()}
	api, err := admin.NewFront(cat, nil, "", fw.forward, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	get := func(h http.Handler, path, token string, into any) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s through a front: %d %s", path, rec.Code, rec.Body)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), into); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var nodes []branches.NodeInfo
	get(api.Local(), "/v1/nodes", "", &nodes)
	if len(nodes) != 1 || nodes[0].ID != "node-1" || nodes[0].Self {
		t.Fatalf("nodes through a front: %+v, want node-1, not this server", nodes)
	}
	var info struct {
		Listen string `json:"listen"`
		Role   string `json:"role"`
	}
	get(api.Remote(), "/v1/info", "pgbp_ci-secret", &info)
	if info.Listen != "127.0.0.1:6432" || info.Role != admin.RoleCI {
		t.Fatalf("info through a front with a ci token: %+v, want the front's listen and role ci", info)
	}
}

package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/pgbranchproxy/pgbranchproxy/branches"
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

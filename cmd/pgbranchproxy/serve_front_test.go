package main

import (
	"errors"
	"path/filepath"
	"testing"

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

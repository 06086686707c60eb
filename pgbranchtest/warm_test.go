package pgbranchtest_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/pgbranchtest"
)

// TestWarmWithoutAdmin: Warm cannot hold a pool without the admin API, and says
// that it could not reach it (not that a source is missing).
func TestWarmWithoutAdmin(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "admin.sock")
	restore, err := pgbranchtest.Warm(context.Background(), 2,
		pgbranchtest.WithProxyURL("postgres://postgres@127.0.0.1:1/app"), pgbranchtest.WithAdmin(sock, ""))
	if err == nil || restore != nil || !strings.Contains(err.Error(), "admin API") || !strings.Contains(err.Error(), sock) {
		t.Fatalf("Warm without the admin API = %v, want its dial error", err)
	}
}

package peer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/seedcopy"
	"go.uber.org/zap"
)

// oneSeed serves seed 7 from dir.
type oneSeed struct {
	dir string
	m   seedcopy.Manifest
}

func (o oneSeed) SeedForPeer(_ context.Context, id int64) (string, seedcopy.Manifest, error) {
	if id != 7 {
		return "", seedcopy.Manifest{}, fmt.Errorf("seed %d: %w", id, fs.ErrNotExist)
	}
	return o.dir, o.m, nil
}

// TestFetch: a seed comes over whole and checked; a manifest that is not the
// catalog's, and a seed the node does not hold, are refused and leave nothing.
func TestFetch(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "data", "PG_VERSION"), []byte("15\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := seedcopy.Build(src, -1)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(oneSeed{src, m}, zap.NewNop()))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	c := &Client{}
	ctx := context.Background()
	uid, gid := os.Getuid(), os.Getgid()

	dst := filepath.Join(t.TempDir(), "c7")
	got, err := c.Fetch(ctx, "n1", addr, 7, m.Digest(), dst, uid, gid)
	if err != nil || got.Digest() != m.Digest() {
		t.Fatalf("fetch: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "data", "PG_VERSION")); err != nil || string(b) != "15\n" {
		t.Fatalf("the copy holds %q %v", b, err)
	}

	other := filepath.Join(t.TempDir(), "c7")
	if _, err := c.Fetch(ctx, "n1", addr, 7, strings.Repeat("0", 64), other, uid, gid); !errors.Is(err, seedcopy.ErrCorrupt) {
		t.Fatalf("a manifest that is not the catalog's: %v", err)
	}
	if _, err := c.Fetch(ctx, "n1", addr, 8, "", other, uid, gid); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a seed the node does not hold: %v", err)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Fatalf("a refused fetch left %s: %v", other, err)
	}
}

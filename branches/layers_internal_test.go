package branches

import (
	"errors"
	"path/filepath"
	"testing"
)

// A layer that is not on this disk (a seed another host built) is named, not
// left to the mount to fail on.
func TestLayersPresent(t *testing.T) {
	dir := t.TempDir()
	if err := layersPresent([]string{dir}); err != nil {
		t.Fatal(err)
	}
	if err := layersPresent([]string{dir, filepath.Join(dir, "elsewhere")}); !errors.Is(err, ErrLayerMissing) {
		t.Fatalf("a missing layer: %v, want ErrLayerMissing", err)
	}
}

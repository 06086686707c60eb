package runtime_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
)

// dockerRuntime is the Docker runtime of the conformance tests.
func dockerRuntime(t *testing.T) (*runtime.Docker, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("talks to the Docker Engine: skipped with -short")
	}
	_, dir := newProcess(t)
	return runtimes(t, dir)["docker"].(*runtime.Docker), dir
}

// TestDockerMissingImage: a server whose image was removed from the Engine after
// its source was added does not start, and the error says what to do, as source
// add says it.
func TestDockerMissingImage(t *testing.T) {
	d, dir := dockerRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const image = "pgbranchproxy/no-such-image:0"
	_, err := d.Start(ctx, runtime.Spec{Name: "missing-image", Image: image, Version: "15",
		DataDir: filepath.Join(dir, "data"), SocketDir: filepath.Join(dir, "run"), LogFile: filepath.Join(dir, "server.log")})
	if err == nil || !strings.Contains(err.Error(), d.CheckImage(ctx, image).Error()) {
		t.Errorf("Start from a missing image: %v, want %q", err, d.CheckImage(ctx, image))
	}
}

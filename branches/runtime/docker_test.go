package runtime_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	docker "github.com/docker/docker/client"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"go.uber.org/zap"
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

// TestDockerJobLogCapped: a job's container (initdb, psql -f of a SQL file,
// pg_restore, pg_dump of a schema) asks the Engine to keep its copy of the output
// bounded, as a server's does, rather than leave it to the Engine's default
// json-file log, which grows for as long as the container runs.
func TestDockerJobLogCapped(t *testing.T) {
	created := make(chan container.HostConfig, 1)
	d := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/containers/create") {
			return
		}
		var body struct{ HostConfig container.HostConfig }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Error(err)
		}
		created <- body.HostConfig
		http.Error(w, `{"message":"refused by the test"}`, http.StatusInternalServerError)
	})
	if err := d.Run(context.Background(), runtime.Job{Prog: "psql"}); err == nil {
		t.Fatal("Run succeeded on an Engine that refuses every container")
	}
	cfg := (<-created).LogConfig
	if cfg.Type != "json-file" || cfg.Config["max-size"] == "" {
		t.Errorf("job container log config %+v, want json-file with a max-size", cfg)
	}
}

// TestDockerCheckLimits: more CPUs than the Engine's host has are refused before
// they are recorded, rather than at every start of a server that has them.
func TestDockerCheckLimits(t *testing.T) {
	d := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/info") {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"NCPU": 2}`))
		}
	})
	ctx := context.Background()
	for cpus, ok := range map[float64]bool{0: true, 0.5: true, 2: true, 2.5: false, 64: false} {
		if err := d.CheckLimits(ctx, runtime.Limits{CPUs: cpus}); (err == nil) != ok {
			t.Errorf("CheckLimits(%g cpus) on a 2-CPU Engine: %v, want ok %v", cpus, err, ok)
		}
	}
}

// fakeEngine is a Docker runtime whose Engine is handle (which answers _ping with
// nothing).
func fakeEngine(t *testing.T, handle http.HandlerFunc) *runtime.Docker {
	t.Helper()
	engine := httptest.NewServer(handle)
	t.Cleanup(engine.Close)
	cli, err := docker.NewClientWithOpts(docker.WithHost("tcp://"+engine.Listener.Addr().String()), docker.WithVersion("1.41"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	d, err := runtime.NewDocker(context.Background(), runtime.DockerConfig{Client: cli, Image: "pg", Instance: "fake",
		User: runtime.OSUser{UID: 101, GID: 104}, WorkDir: t.TempDir()}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

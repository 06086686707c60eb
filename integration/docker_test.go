package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	docker "github.com/docker/docker/client"
)

// INTEGRATION_RUNTIME=docker runs every server the harness starts with
// `--runtime docker --image $INTEGRATION_IMAGE` (default: the image `make image`
// builds). TestDockerRuntimeSuite runs the lifecycle, fork, crash and torture tests
// that way in a child `go test`.

// dockerImage is the image servers run in under the Docker runtime.
func dockerImage() string {
	if img := os.Getenv("INTEGRATION_IMAGE"); img != "" {
		return img
	}
	return "pgbranchproxy/postgres:15"
}

func dockerRuntime() bool { return os.Getenv("INTEGRATION_RUNTIME") == "docker" }

// runtimeArgs are the flags serve gets for the runtime under test, unless the test
// chose one itself.
func runtimeArgs(extra []string) []string {
	if !dockerRuntime() || slices.Contains(extra, "--runtime") {
		return nil
	}
	return []string{"--runtime", "docker", "--image", dockerImage()}
}

func dockerClient(t testing.TB) *docker.Client {
	t.Helper()
	cli, err := docker.NewClientWithOpts(docker.FromEnv, docker.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// containersOf lists the containers (running or not) labelled with the instance id
// of the state directory under dir.
func containersOf(t testing.TB, cli *docker.Client, state string) []container.Summary {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, "instance-id"))
	if err != nil {
		return nil // never ran with the Docker runtime
	}
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", "pgbranchproxy.instance="+strings.TrimSpace(string(b))))})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// assertNoContainers fails for every container of dir's state directory still on
// the Engine, and removes it.
func assertNoContainers(t testing.TB, dir string) {
	t.Helper()
	state := filepath.Join(dir, "state")
	if _, err := os.Stat(filepath.Join(state, "instance-id")); err != nil {
		return
	}
	cli := dockerClient(t)
	for _, c := range containersOf(t, cli, state) {
		t.Errorf("container %s (%s, %s) left behind", c.ID[:12], c.Labels["pgbranchproxy.name"], c.State)
		cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	}
}

// TestDockerRuntimeSuite runs the lifecycle, fork, crash, torture and warm pool tests
// again with every branch server in a container.
func TestDockerRuntimeSuite(t *testing.T) {
	if dockerRuntime() {
		t.Skip("this run is the Docker one")
	}
	tests := []string{
		"TestIdleStopAndWake", "TestResetOnConnect", "TestMaxRunning", // lifecycle
		"TestBranchFromBranch", // fork
		"TestKill9AndRestart",  // crash
		"TestCopyOnWriteTorture",
		"TestWarmPool", // pool, claim, refill, refresh, crash
	}
	cmd := exec.Command("go", "test", "-count=1", "-timeout", "30m", "-v", "-run", "^("+strings.Join(tests, "|")+")$", ".")
	cmd.Env = append(os.Environ(), "INTEGRATION_RUNTIME=docker", "INTEGRATION_IMAGE="+dockerImage())
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--- ") || strings.HasPrefix(line, "ok") || strings.HasPrefix(line, "FAIL") {
			t.Log(line)
		}
	}
	if err != nil {
		t.Fatalf("the suite under --runtime docker failed: %v\n%s", err, out)
	}
	for _, name := range tests {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass under --runtime docker", name)
		}
	}
}

// tortureScale divides the torture test's big table: a quarter of it under the Docker
// runtime, where that test runs a second time in make test.
func tortureScale() int {
	if dockerRuntime() {
		return 4
	}
	return 1
}

// bigRows is the row count of the torture test's big table.
func bigRows() string { return strconv.Itoa(1000000 / tortureScale()) }

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/pgbranchproxy/pgbranchproxy/branches"
)

// dockerServer starts serve with the Docker runtime whatever INTEGRATION_RUNTIME says.
func dockerServer(t *testing.T, state string, extra ...string) *server {
	t.Helper()
	return startServer(t, state, append([]string{"--runtime", "docker", "--image", dockerImage()}, extra...)...)
}

// TestDockerMemoryLimit: a branch whose query needs more than its memory limit is
// killed by the kernel and comes back on the next connect; another branch's session
// never notices.
func TestDockerMemoryLimit(t *testing.T) {
	s := dockerServer(t, newStateDir(t))
	s.seedSQL("mem", "CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 1000) g;")
	ctx := context.Background()
	calm := s.connect(t, "mem@calm")
	if _, err := calm.Exec(ctx, "UPDATE t SET v = 'calm' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	s.mustCLI("branch", "create", "hog", "--source", "mem")
	s.mustCLI("branch", "set", "hog", "--branch-memory", "256MB")
	s.mustCLI("branch", "stop", "hog") // limits apply from the next start
	hog := s.connect(t, "mem@hog")
	cli := dockerClient(t)
	for _, c := range containersOf(t, cli, s.state) {
		if c.Labels["pgbranchproxy.branch"] != "hog" {
			continue
		}
		info, err := cli.ContainerInspect(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if info.HostConfig.Memory != 256<<20 {
			t.Errorf("hog's container has memory limit %d, want %d", info.HostConfig.Memory, 256<<20)
		}
		if lc := info.HostConfig.LogConfig; lc.Type != "json-file" || lc.Config["max-size"] != "10m" {
			t.Errorf("hog's container logs with %+v, want a bounded json-file log", lc)
		}
	}
	// An in-memory sort of ~600 MB.
	_, err := hog.Exec(ctx, "SET work_mem = '4GB'; SELECT count(*) FROM (SELECT g, repeat(md5(g::text), 4) AS pad FROM generate_series(1, 4000000) g ORDER BY pad) s")
	if err == nil {
		t.Fatal("a 600 MB sort under a 256 MB limit succeeded")
	}
	t.Logf("the query under the limit: %v", err)
	var v string
	if err := calm.QueryRow(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v); err != nil || v != "calm" {
		t.Errorf("the other branch's session after the kill: %q %v", v, err)
	}
	// The next connect gets the branch back (restarted or recovered).
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := s.psql(t, "mem@hog", "SELECT count(*) FROM t")
		if err == nil && out == "1000" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hog did not come back: %q %v\n%s", out, err, s.logs())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestDockerLimitsRefusedUpFront: limits under which no branch server could run
// (too few processes to fork a session, less memory than its shared buffers and
// one maintenance operation take) are refused where they are given, serve's at
// start and a source's or branch's when set, rather than accepted and then failing
// at the branch's first session or heavy statement.
func TestDockerLimitsRefusedUpFront(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for flag, want := range map[string]string{"--branch-pids=4": "--branch-pids: a limit of 4 processes: a branch server needs at least 8",
		"--branch-memory=100MB": "--branch-memory: a memory limit of 100MB: a branch server needs at least 192MB"} {
		out := serveRefused(t, ctx, newStateDir(t), "--runtime", "docker", "--image", dockerImage(), flag)
		if !strings.Contains(out, want) {
			t.Errorf("serve %s said:\n%s\nwant %q", flag, out, want)
		}
	}

	s := dockerServer(t, newStateDir(t))
	s.seedSQL("lim", "CREATE TABLE t (id int);")
	s.mustCLI("branch", "create", "b", "--source", "lim")
	if out, err := s.cli("branch", "set", "b", "--branch-pids", "7"); err == nil || !strings.Contains(out, "needs at least 8") {
		t.Errorf("branch set --branch-pids 7: %v\n%s", err, out)
	}
	if out, err := s.cli("source", "add", "small", "--empty", "--branch-memory", "64MB"); err == nil || !strings.Contains(out, "shared_buffers (128MB)") {
		t.Errorf("source add --branch-memory 64MB: %v\n%s", err, out)
	}
	if out := s.mustCLI("source", "ls"); strings.Contains(out, "small") {
		t.Errorf("the refused source was kept:\n%s", out)
	}
	if out, err := s.psql(t, "lim@b", "SELECT count(*) FROM t"); err != nil || out != "0" {
		t.Errorf("branch b after the refused set: %q %v", out, err)
	}
}

// TestDockerTwoImages: two sources on two images side by side; each source's branch
// servers run in its own image. Only PostgreSQL 15 is installable here, so the second
// image is a second tag of the same root filesystem. branch ls and source ls show
// the image of each, and a branch's limits.
func TestDockerTwoImages(t *testing.T) {
	cli := dockerClient(t)
	ctx := context.Background()
	second := strings.Split(dockerImage(), ":")[0] + ":15-second"
	if err := cli.ImageTag(ctx, dockerImage(), second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the tag only: the image keeps its first
		if _, err := cli.ImageRemove(context.Background(), second, image.RemoveOptions{}); err != nil {
			t.Errorf("remove tag %s: %v", second, err)
		}
	})
	s := dockerServer(t, newStateDir(t))
	for _, src := range []struct{ name, image string }{{"one", dockerImage()}, {"two", second}} {
		f := filepath.Join(filepath.Dir(s.state), src.name+".sql")
		if err := os.WriteFile(f, []byte("CREATE TABLE who (name text); INSERT INTO who VALUES ('"+src.name+"');"), 0o644); err != nil {
			t.Fatal(err)
		}
		s.mustCLI("source", "add", src.name, "--from-sql", f, "--image", src.image)
	}
	images := map[string]string{}
	for _, db := range []string{"one", "two"} {
		if out, err := s.psql(t, db+"@b", "SELECT name FROM who"); err != nil || out != db {
			t.Fatalf("%s@b: %q %v", db, out, err)
		}
	}
	for _, c := range containersOf(t, cli, s.state) {
		images[c.Labels["pgbranchproxy.source"]] = c.Image
	}
	if images["one"] != dockerImage() || images["two"] != second {
		t.Errorf("images of the branch servers by source: %v", images)
	}
	// branch ls and source ls show each one's image, and limits where set.
	s.mustCLI("branch", "set", "b", "--source", "two", "--branch-cpus", "0.5")
	var list []branchInfo
	if err := json.Unmarshal([]byte(s.mustCLI("branch", "ls", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	want := map[string]branches.ServerView{"one": {Image: dockerImage()}, "two": {Image: second, CPUs: 0.5}}
	for _, b := range list {
		if b.ServerView != want[b.Source] {
			t.Errorf("branch ls --json: %s/%s has %+v, want %+v", b.Source, b.Name, b.ServerView, want[b.Source])
		}
	}
	if out := s.mustCLI("branch", "ls"); !strings.Contains(out, "IMAGE") || !strings.Contains(out, second) || !strings.Contains(out, "cpus=0.5") {
		t.Errorf("branch ls:\n%s", out)
	}
	if out := s.mustCLI("source", "ls"); !strings.Contains(out, "IMAGE") || !strings.Contains(out, second) || strings.Contains(out, "LIMITS") {
		t.Errorf("source ls (no source limits):\n%s", out)
	}
	if _, err := s.cli("source", "add", "bad", "--empty", "--image", "pgbranchproxy/no-such-image:1"); err == nil {
		t.Error("source add with a missing image succeeded")
	}
}

// TestDockerReconcileAfterKill9: five branch containers outlive a kill -9 of serve;
// the next start removes them all, and after a clean stop none is left.
func TestDockerReconcileAfterKill9(t *testing.T) {
	state := newStateDir(t)
	s := dockerServer(t, state)
	s.seedSQL("shop", shopSQL)
	for i := range 5 {
		s.connect(t, fmt.Sprintf("shop@r%d", i)).Close(context.Background())
	}
	cli := dockerClient(t)
	if n := len(containersOf(t, cli, state)); n != 5 {
		t.Fatalf("%d containers before kill -9, want 5", n)
	}
	s.kill9()
	if n := len(containersOf(t, cli, state)); n != 5 {
		t.Fatalf("%d containers after kill -9, want the 5 branch servers", n)
	}
	s2 := dockerServer(t, state)
	if left := containersOf(t, cli, state); len(left) != 0 {
		t.Errorf("%d containers of the killed run after restart", len(left))
	}
	// What a server wrote after serve died (here its shutdown) is kept in its log.
	logs, _ := filepath.Glob(filepath.Join(state, "branches", "*", "postgres.log"))
	kept := 0
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		if strings.Contains(string(b), "after its proxy stopped following it") && strings.Contains(string(b), "shutting down") {
			kept++
		}
	}
	if kept != 5 {
		t.Errorf("%d of %d branch logs hold their server's shutdown after kill -9, want 5", kept, len(logs))
	}
	for name, b := range s2.branches() {
		if b.State != "stopped" {
			t.Errorf("branch %s after reconcile: %s, want stopped", name, b.State)
		}
	}
	if out, err := s2.psql(t, "shop@r3", "SELECT count(*) FROM accounts"); err != nil {
		t.Fatalf("r3 after restart: %q %v", out, err)
	}
	s2.stop()
	if left := containersOf(t, cli, state); len(left) != 0 {
		t.Errorf("%d containers after a clean stop", len(left))
	}
}

// TestDockerClaimedName: a branch claimed from the warm pool runs in the pool
// member's container, which docker ps then shows under the branch's name.
func TestDockerClaimedName(t *testing.T) {
	state := newStateDir(t)
	s := dockerServer(t, state, "--warm", "1")
	s.seedSQL("shop", shopSQL)
	waitPool(t, s, 1)
	s.connect(t, "shop@claimed").Close(context.Background())
	if claims, _ := s.poolEvents(t); claims != 1 {
		t.Fatalf("claims = %d, want 1", claims)
	}
	pid := s.branches()["claimed"].PID
	cli := dockerClient(t)
	eventually(t, 10*time.Second, "the claimed branch's container named after it", func() bool {
		for _, c := range containersOf(t, cli, state) {
			info, err := cli.ContainerInspect(context.Background(), c.ID)
			if err == nil && info.State != nil && info.State.Pid == pid {
				return strings.HasPrefix(info.Name, "/pgbranch-shop-claimed-")
			}
		}
		return false
	})
}

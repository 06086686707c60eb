package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/image"
)

// TestImageScript: make image's script builds an image whose initdb finds the
// host's locales (`locale -a`), so that a seed made under --runtime docker has the
// collations one made by a local initdb has (C.utf8 …); it does nothing for a tag
// it built, and builds again a tag an older script built.
func TestImageScript(t *testing.T) {
	var raw [4]byte
	rand.Read(raw[:])
	tag := "pgbranchproxy-test/postgres:15-" + hex.EncodeToString(raw[:])
	cli := dockerClient(t)
	ctx := context.Background()
	t.Cleanup(func() { cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true}) })
	build := func() string {
		t.Helper()
		out, err := exec.Command("../scripts/image.sh", tag).CombinedOutput()
		if err != nil {
			t.Fatalf("image.sh: %v\n%s", err, out)
		}
		return string(out)
	}
	build()
	host, err := exec.Command("locale", "-a").Output()
	if err != nil {
		t.Fatal(err)
	}
	in, err := exec.Command("docker", "run", "--rm", "--network", "none", "--entrypoint", "locale", tag, "-a").CombinedOutput()
	if err != nil || string(in) != string(host) {
		t.Errorf("locale -a in the image: %v\n%s\nwant the host's:\n%s", err, in, host)
	}
	if out := build(); !strings.Contains(out, "exists") {
		t.Errorf("a second build of %s: %q, want it left as it is", tag, out)
	}
	info, err := cli.ImageInspect(ctx, tag)
	if err != nil || info.Config.Labels["pgbranchproxy.image"] == "" {
		t.Fatalf("the image's layout label: %v %v", info.Config.Labels, err)
	}
	// A tag an older script built (one without the layout label) is built again.
	old := tag + "-old"
	t.Cleanup(func() { cli.ImageRemove(context.Background(), old, image.RemoveOptions{Force: true}) })
	imp := exec.Command("docker", "import", "-", old)
	imp.Stdin = strings.NewReader(string(make([]byte, 1024))) // an empty tar archive
	id, err := imp.Output()
	if err != nil {
		t.Fatalf("docker import: %v", err)
	}
	// Removed by the rebuild; by its id should the test fail first.
	t.Cleanup(func() {
		cli.ImageRemove(context.Background(), strings.TrimSpace(string(id)), image.RemoveOptions{Force: true})
	})
	out, err := exec.Command("../scripts/image.sh", old).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "building it again") {
		t.Fatalf("image.sh on a tag an older script built: %v\n%s", err, out)
	}
	if info, err := cli.ImageInspect(ctx, old); err != nil || info.Config.Labels["pgbranchproxy.image"] == "" {
		t.Errorf("%s rebuilt has labels %v (%v)", old, info.Config.Labels, err)
	}
	// The image it replaced, which no container uses, is not left behind untagged.
	if _, err := cli.ImageInspect(ctx, strings.TrimSpace(string(id))); err == nil {
		t.Errorf("the image %s replaced is still on the Engine", old)
	}
}

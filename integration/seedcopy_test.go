package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestSeedCopies: a node copies the seed another node built, over the cluster's
// mutual TLS, byte for byte and no larger on disk (holes stay holes); fronts
// place new branches on it once it holds the seed, and its branches read the
// seed's data; after a refresh it copies the new generation and removes the old
// copy once unused. The peer listener refuses a client without a node
// certificate.
func TestSeedCopies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, url := startCatalog(t, ctx)
	dir := makeCluster(t, []string{"node-a", "node-b"}, []string{"front-1"})
	node := func(name string) *server {
		return startServer(t, newStateDir(t), "--catalog", url, "--role", "node", "--cluster-dir", dir,
			"--cluster-name", name, "--reap-interval", "300ms")
	}
	a := node("node-a")
	a.seedSQL("app", lifecycleSQL)
	b := node("node-b")
	f := startFront(t, url, "--cluster-dir", dir, "--cluster-name", "front-1")

	copyOf := func(s *server) string { return seedCopy(s, "app") }
	waitSeedCopy(t, b, "app")
	eventually(t, 10*time.Second, "source ls names both nodes as holding the seed", func() bool {
		var srcs []struct {
			Nodes []string `json:"nodes"`
		}
		return json.Unmarshal([]byte(a.mustCLI("source", "ls", "--json")), &srcs) == nil && len(srcs) == 1 &&
			slices.Equal(srcs[0].Nodes, []string{"node-a", "node-b"})
	})
	built, copied := filepath.Join(a.state, "seeds", "app", "g1", "data"), filepath.Join(copyOf(b), "data")
	if got, want := seedChecksum(t, copied), seedChecksum(t, built); got != want {
		t.Fatalf("the copy's content %s, the seed's %s", got, want)
	}
	if got, want := allocated(t, copied), allocated(t, built); got > want+want/20 {
		t.Fatalf("the copy takes %d bytes on disk, the seed %d: holes were filled", got, want)
	}

	// New names spread over both nodes now; those on b read the seed's data.
	onB := ""
	for i := 0; onB == "" && i < 32; i++ {
		name := fmt.Sprintf("n%d", i)
		if out, err := f.psql(t, "app@"+name, "SELECT v FROM t WHERE id = 2"); err != nil || out != "seed" {
			t.Fatalf("branch %s through the front: %q %v\n%s\n%s", name, out, err, f.logs(), b.logs())
		}
		if _, ok := b.branches()[name]; ok {
			onB = name
		}
	}
	if onB == "" {
		t.Fatalf("no new branch was placed on the node with the copy\n%s", f.logs())
	}

	// A refresh on a: b copies generation 2 and, once its branch is gone, drops
	// the copy of generation 1.
	first := copyOf(b)
	a.mustCLI("source", "refresh", "app")
	b.mustCLI("branch", "destroy", onB)
	deadline := time.Now().Add(30 * time.Second)
	for c := copyOf(b); c == "" || c == first; c = copyOf(b) {
		if time.Now().After(deadline) {
			all, _ := filepath.Glob(filepath.Join(b.state, "seeds", "app", "*"))
			t.Fatalf("node b has %v, want only a copy of generation 2\n%s\n%s", all, b.logs(), a.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Fatalf("the old copy %s is still there: %v", first, err)
	}

	// The peer listener hands out seeds to nodes only.
	var nodes []struct {
		ID       string `json:"id"`
		PeerAddr string `json:"peer_addr"`
	}
	if err := json.Unmarshal([]byte(a.mustCLI("node", "ls", "--json")), &nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.PeerAddr == "" {
			t.Fatalf("node %s has no peer address: %+v", n.ID, nodes)
		}
		c, err := tls.Dial("tcp", n.PeerAddr, &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			_, err = c.Write([]byte("GET /v1/seeds/1 HTTP/1.0\r\n\r\n"))
			if err == nil {
				_, err = c.Read(make([]byte, 1))
			}
			c.Close()
		}
		if err == nil {
			t.Fatalf("node %s's peer listener answered a client without a certificate", n.ID)
		}
	}
}

// seedCopy is the directory of s's only complete copy of source's seed, or "".
func seedCopy(s *server, source string) string {
	m, _ := filepath.Glob(filepath.Join(s.state, "seeds", source, "c*", "manifest.json"))
	if len(m) != 1 {
		return ""
	}
	return filepath.Dir(m[0])
}

// waitSeedCopy waits until node s holds a copy of source's seed and the catalog
// says so: fronts place new branches only on nodes that the catalog lists as
// holders, and a node records its copy just after writing its manifest.
func waitSeedCopy(t *testing.T, s *server, source string) {
	t.Helper()
	eventually(t, 30*time.Second, "the node copies the seed", func() bool { return seedCopy(s, source) != "" })
	i := slices.Index(s.args, "--catalog")
	if i < 0 || i+1 >= len(s.args) {
		t.Fatalf("node %s has no --catalog", s.state)
	}
	c, err := pgx.Connect(context.Background(), s.args[i+1])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	node := mustStateID(t, s.state)
	eventually(t, 30*time.Second, "the catalog lists the node's copy", func() bool {
		var n int
		err := c.QueryRow(context.Background(), `SELECT count(*) FROM node_seeds ns JOIN seeds sd ON sd.id = ns.seed_id
			WHERE ns.node_id = $1 AND sd.source = $2`, node, source).Scan(&n)
		return err == nil && n > 0
	})
}

// allocated is the bytes dir's files take on disk.
func allocated(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().IsRegular() {
			n += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

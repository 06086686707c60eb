package kubernetes_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog/catalogtest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// The seed the test serves: the password is the one clients give the front.
const seedSQL = `ALTER ROLE postgres PASSWORD 'k8s-pw';
CREATE TABLE t (id int PRIMARY KEY, v text);
INSERT INTO t SELECT g, 'seed' FROM generate_series(1, 100) g;
CREATE TABLE gone (id int);
`

// cluster is what TestNodeContainer runs: the pod specs of node.yaml and
// front.yaml, the image, and what a cluster's operator would have made.
type cluster struct {
	node, front *corev1.PodSpec
	id          string // of this run, in the names of its containers and image
	image       string
	network     string
	prefix      string // of the network's addresses
	catalog     *catalogtest.Server
	certs       string // the cluster directory (cluster init, cluster issue)
}

// TestNodeContainer runs node.yaml's and front.yaml's containers under Docker
// as their pod specs say (a check of those specs, not of Kubernetes): a client
// reaches a new branch through the front, over the cluster's mutual TLS; the
// node mounts OverlayFS with only its capabilities, under Docker's default
// seccomp profile, on a read-only root; it writes, drops a table (a
// whiteout), forks a branch of a branch; stopped within its grace period it
// exits 0, and started again on the same host directory it is the same node
// and serves the branch with its data. Without SYS_ADMIN the node fails to
// start: the mount is refused.
func TestNodeContainer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the node and front containers under Docker: not with -short")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root: the catalog server runs as postgres, and Docker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := newCluster(t, ctx)

	url := cl.newCatalog(t, ctx)
	node := cl.nodePod(t, 1, url, nil)
	node.start(t, ctx, cl.node)
	cl.seed(t, node)
	front := cl.frontPod(t, url)
	front.start(t, ctx, cl.front)

	conn := connect(t, ctx, front.ip, "app@k8s", "")
	for _, q := range []string{"UPDATE t SET v = 'k8s' WHERE id = 1", "DROP TABLE gone"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s through the front: %v\n%s\n%s", q, err, front.logs(t), node.logs(t))
		}
	}
	conn.Close(ctx)
	child := connect(t, ctx, front.ip, "app@k8s-child", "-c pgbranch.from=k8s")
	checkBranch(t, ctx, child, "the branch of the branch")
	child.Close(ctx)
	if id := readFile(t, filepath.Join(node.hostPaths["/var/lib/pgbranchproxy"], "state", "state-id")); id != node.nodeName {
		t.Errorf("node id %q, want its host's name %q", id, node.nodeName)
	}

	cl.restart(t, ctx, node)
	again := connect(t, ctx, front.ip, "app@k8s", "")
	checkBranch(t, ctx, again, "the branch after the node's restart")
	again.Close(ctx)

	t.Run("WithoutSysAdmin", func(t *testing.T) {
		p := cl.nodePod(t, 2, cl.newCatalog(t, ctx), []corev1.Capability{"SYS_ADMIN"})
		docker(t, p.dockerArgs(t, cl.node, container(t, cl.node))...)
		t.Cleanup(func() { exec.Command("docker", "rm", "-f", p.name).Run() })
		code := docker(t, "wait", p.name)
		if logs := p.logs(t); strings.TrimSpace(code) == "0" || !strings.Contains(logs, "mount overlay") ||
			!strings.Contains(logs, "operation not permitted") {
			t.Errorf("a node without SYS_ADMIN exited %s, want a refused mount:\n%s", code, logs)
		}
	})
}

// restart stops the node as the kubelet would, within the DaemonSet's grace
// period, and starts the same container (same host directory, same address).
func (cl *cluster) restart(t *testing.T, ctx context.Context, node *pod) {
	t.Helper()
	grace := fmt.Sprint(ptrOr(cl.node.TerminationGracePeriodSeconds))
	start := time.Now()
	docker(t, "stop", "-t", grace, node.name)
	took := time.Since(start)
	if code := strings.TrimSpace(docker(t, "inspect", "-f", "{{.State.ExitCode}}", node.name)); code != "0" {
		t.Fatalf("the node exited %s on SIGTERM after %v, want 0:\n%s", code, took, node.logs(t))
	}
	t.Logf("the node stopped in %v", took.Round(time.Millisecond))
	docker(t, "start", node.name)
	node.waitReady(t, ctx, container(t, cl.node))
}

// checkBranch: the branch has the write and the dropped table of app@k8s.
func checkBranch(t *testing.T, ctx context.Context, conn *pgx.Conn, what string) {
	t.Helper()
	var v string
	var gone bool
	err := conn.QueryRow(ctx, "SELECT v, to_regclass('gone') IS NULL FROM t WHERE id = 1").Scan(&v, &gone)
	if err != nil || v != "k8s" || !gone {
		t.Errorf("%s: v %q, table gone %t, %v; want k8s, true", what, v, gone, err)
	}
}

// connect opens a session through the front at ip, as a client would.
func connect(t *testing.T, ctx context.Context, ip, db, options string) *pgx.Conn {
	t.Helper()
	dsn := fmt.Sprintf("host=%s port=6432 user=postgres password=k8s-pw dbname=%s sslmode=require", ip, db)
	if options != "" {
		dsn += " options='" + options + "'"
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to %s through the front: %v", db, err)
	}
	return conn
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// newCluster builds the image, starts a catalog server and makes the cluster
// CA, a Docker network, and the pod specs.
func newCluster(t *testing.T, ctx context.Context) *cluster {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Fatal("needs docker")
	}
	objs := loadManifests(t)
	cl := &cluster{
		node:  &only[*appsv1.DaemonSet](t, objs).Spec.Template.Spec,
		front: &only[*appsv1.Deployment](t, objs).Spec.Template.Spec,
		id:    fmt.Sprintf("k8s-test-%d", rand.IntN(1<<30)),
		certs: t.TempDir(),
	}
	cl.image = buildImage(t, "pgbranchproxy/pgbranchproxy:"+cl.id)
	cl.network, cl.prefix = dockerNetwork(t)
	var err error
	if cl.catalog, err = catalogtest.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.catalog.Stop() })
	run(t, binPath, "cluster", "init", "--dir", cl.certs)
	return cl
}

// buildImage builds the image tag with image.sh from this tree's binary and
// shim.
func buildImage(t *testing.T, tag string) string {
	t.Helper()
	if out, err := exec.Command("make", "-s", "-C", "../../shim", "all").CombinedOutput(); err != nil {
		t.Fatalf("build the shim: %v\n%s", err, out)
	}
	cmd := exec.Command("./image.sh", tag)
	shim, _ := filepath.Abs("../../shim/liblazyrw.so")
	cmd.Env = append(os.Environ(), "BIN="+binPath, "SHIM="+shim)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("image.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })
	return tag
}

// newCatalog returns the URL of a new catalog database as the containers
// reach it: over TCP, through a relay on this host's address on the network
// to the server's unix socket.
func (cl *cluster) newCatalog(t *testing.T, ctx context.Context) string {
	t.Helper()
	url, err := cl.catalog.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db := url[len("postgres:///"):strings.Index(url, "?")]
	socket := url[strings.Index(url, "host=")+len("host=") : strings.Index(url, "&user=")]
	addr := relay(t, cl.prefix+"1:0", filepath.Join(socket, ".s.PGSQL.5432"))
	return "postgres://postgres@" + addr + "/" + db + "?sslmode=disable"
}

// relay listens on addr and copies each connection to and from the unix
// socket at path, until the test ends; it returns the address it listens on.
func relay(t *testing.T, addr, path string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { pipe(c, path) })
		}
	})
	return ln.Addr().String()
}

// pipe copies between c and a new connection to the unix socket at path, and
// closes both when either side is done.
func pipe(c net.Conn, path string) {
	defer c.Close()
	s, err := net.Dial("unix", path)
	if err != nil {
		return
	}
	defer s.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(s, c); done <- struct{}{} }()
	go func() { io.Copy(c, s); done <- struct{}{} }()
	<-done
}

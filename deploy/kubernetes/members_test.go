package kubernetes_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// nodePod returns the pod of node n (its host is k8s-node-<n>) on a host
// directory of its own, with its certificate in the node Secret as README.md
// makes it, less the capabilities in without.
func (cl *cluster) nodePod(t *testing.T, n int, catalogURL string, without []corev1.Capability) *pod {
	t.Helper()
	name, ip := "k8s-node-"+strconv.Itoa(n), cl.prefix+strconv.Itoa(10+n)
	run(t, binPath, "cluster", "issue", "--dir", cl.certs, "--role", "node", "--name", name)
	state := t.TempDir()
	os.Chmod(state, 0o755) // as DirectoryOrCreate makes it
	return &pod{
		name: "pgbranch-" + name + "-" + cl.id, image: cl.image,
		network: cl.network, ip: ip, nodeName: name,
		hostPaths: map[string]string{"/var/lib/pgbranchproxy": state},
		secrets: map[string]string{"pgbranchproxy-node-cluster": secretDir(t, 0o400, 0,
			map[string]string{"ca.crt": "ca.crt", "node-" + name + ".crt": "node-" + name + ".crt", "node-" + name + ".key": "node-" + name + ".key"}, cl.certs)},
		values:  map[string]string{"pgbranchproxy-catalog/url": catalogURL},
		without: without,
	}
}

// frontPod returns a front pod with the fronts' certificate and a TLS
// certificate for clients.
func (cl *cluster) frontPod(t *testing.T, catalogURL string) *pod {
	t.Helper()
	c := container(t, cl.front)
	name := parseArgs(t, c.Args)["cluster-name"]
	run(t, binPath, "cluster", "issue", "--dir", cl.certs, "--role", "front", "--name", name)
	ip := cl.prefix + "100"
	// Any certificate does for the clients' TLS: one issued by a CA of its own.
	tlsCA := t.TempDir()
	run(t, binPath, "cluster", "init", "--dir", tlsCA)
	run(t, binPath, "cluster", "issue", "--dir", tlsCA, "--role", "node", "--name", "tls", "--host", ip)
	group := ptrOr(cl.front.SecurityContext.FSGroup)
	return &pod{
		name: "pgbranch-front-" + cl.id, image: cl.image,
		network: cl.network, ip: ip, nodeName: "k8s-front-host",
		secrets: map[string]string{
			"pgbranchproxy-front-cluster": secretDir(t, 0o440, group,
				map[string]string{"ca.crt": "ca.crt", "front-" + name + ".crt": "front-" + name + ".crt", "front-" + name + ".key": "front-" + name + ".key"}, cl.certs),
			"pgbranchproxy-front-tls": secretDir(t, 0o440, group, map[string]string{"tls.crt": "node-tls.crt", "tls.key": "node-tls.key"}, tlsCA),
		},
		values: map[string]string{"pgbranchproxy-catalog/url": catalogURL},
	}
}

// seed adds source app to the node, as an operator would with kubectl exec.
func (cl *cluster) seed(t *testing.T, node *pod) {
	t.Helper()
	c := container(t, cl.node)
	stateDir := parseArgs(t, c.Args)["state-dir"]
	_, m := mountOf(cl.node, c, stateDir)
	host := node.hostPaths["/var/lib/pgbranchproxy"]
	if err := os.WriteFile(filepath.Join(host, "seed.sql"), []byte(seedSQL), 0o644); err != nil {
		t.Fatal(err)
	}
	docker(t, "exec", node.name, "pgbranchproxy", "--state-dir", stateDir, "source", "add", "app",
		"--from-sql", filepath.Join(m.MountPath, "seed.sql"))
}

// secretDir lays out a Secret volume's files as the kubelet does: each key a
// file of mode, owned by root and group (fsGroup). files maps keys to files of
// from.
func secretDir(t *testing.T, mode os.FileMode, group int64, files map[string]string, from string) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	for key, src := range files {
		b, err := os.ReadFile(filepath.Join(from, src))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, key)
		if err := os.WriteFile(path, b, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, 0, int(group)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// run runs a command of this host, failing the test if it fails.
func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

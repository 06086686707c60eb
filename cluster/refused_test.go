package cluster_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/cluster"
)

// Every credential that is not a front of the cluster CA is refused by a node's
// listener, and every one that is not the expected node of the cluster CA by a
// front: the side that checks fails with the reason, and the other side fails too.
func TestRefused(t *testing.T) {
	t.Parallel()
	dir, other := newCA(t), newCA(t)
	past := func() time.Time { return time.Now().Add(-48 * time.Hour) }
	expired := cluster.Options{Now: past, Lifetime: 24 * time.Hour}

	nodeA := issue(t, dir, cluster.RoleNode, "a", cluster.Options{})
	nodeB := issue(t, dir, cluster.RoleNode, "b", cluster.Options{})
	front := issue(t, dir, cluster.RoleFront, "f1", cluster.Options{})
	frontAsA := issue(t, dir, cluster.RoleFront, "a", cluster.Options{})
	oldFront := issue(t, dir, cluster.RoleFront, "old", expired)
	oldNode := issue(t, dir, cluster.RoleNode, "old", expired)
	strangerFront := issue(t, other, cluster.RoleFront, "f1", cluster.Options{})
	strangerNode := issue(t, other, cluster.RoleNode, "a", cluster.Options{})

	listener := listenerConfig(t, load(t, nodeA))
	dialA := dialConfig(t, load(t, front), "a")
	old12 := rawClient(t, front)
	old12.MaxVersion = tls.VersionTLS12

	tests := []struct {
		name         string
		srv, cli     *tls.Config
		srvOK, cliOK func(error) bool // the error each end must get
	}{
		{"node certificate as a client", listener, rawClient(t, nodeB), isErr(cluster.ErrWrongRole), anyErr},
		{"front of another CA", listener, rawClient(t, strangerFront), unknownAuthority, anyErr},
		{"expired front", listener, rawClient(t, oldFront), invalidCert(x509.Expired), anyErr},
		{"no client certificate", listener, &tls.Config{InsecureSkipVerify: true}, anyErr, anyErr},
		{"TLS 1.2 client", listener, old12, anyErr, anyErr},
		{"node b for node a", listenerConfig(t, load(t, nodeB)), dialA, anyErr, isErr(cluster.ErrWrongName)},
		{"node of another CA", rawServer(t, strangerNode), dialA, anyErr, unknownAuthority},
		{"expired node", rawServer(t, oldNode), dialA, anyErr, isErr(cluster.ErrExpired)},
		{"front certificate as node a", rawServer(t, frontAsA), dialA, anyErr, invalidCert(x509.IncompatibleUsage)},
	}
	for _, tc := range tests {
		srv, cli := handshake(t, tc.srv, tc.cli)
		if !tc.srvOK(srv.err) || !tc.cliOK(cli.err) {
			t.Errorf("%s: node side %v, front side %v", tc.name, srv.err, cli.err)
		}
	}
}

// Load refuses a member whose certificate is of another CA, expired, or not
// its key's, and a Member gives only its own role's configuration.
func TestLoadRefuses(t *testing.T) {
	t.Parallel()
	dir, other := newCA(t), newCA(t)
	node := issue(t, dir, cluster.RoleNode, "a", cluster.Options{})
	front := issue(t, dir, cluster.RoleFront, "f1", cluster.Options{})
	stranger := issue(t, other, cluster.RoleNode, "a", cluster.Options{})
	old := issue(t, dir, cluster.RoleFront, "old", cluster.Options{Now: func() time.Time { return time.Now().Add(-48 * time.Hour) }, Lifetime: time.Hour})

	if _, err := cluster.Load(cluster.Files{CA: node.CA, Cert: stranger.Cert, Key: stranger.Key}, nil); !unknownAuthority(err) {
		t.Errorf("another CA's member: %v", err)
	}
	if _, err := cluster.Load(old, nil); !errors.Is(err, cluster.ErrExpired) {
		t.Errorf("expired member: %v", err)
	}
	if _, err := cluster.Load(cluster.Files{CA: node.CA, Cert: node.Cert, Key: front.Key}, nil); err == nil {
		t.Error("a certificate with another member's key loaded")
	}
	if _, err := cluster.Load(cluster.Files{CA: node.Cert, Cert: node.Cert, Key: node.Key}, nil); err == nil {
		t.Error("a member certificate loaded as the CA")
	}
	if _, err := load(t, node).DialConfig("b"); !errors.Is(err, cluster.ErrWrongRole) {
		t.Errorf("a node's DialConfig: %v", err)
	}
	if _, err := load(t, front).ListenerConfig(); !errors.Is(err, cluster.ErrWrongRole) {
		t.Errorf("a front's ListenerConfig: %v", err)
	}
	if _, err := load(t, front).DialConfig("../a"); !errors.Is(err, cluster.ErrInvalid) {
		t.Errorf("DialConfig of a bad name: %v", err)
	}
}

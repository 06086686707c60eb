package cluster_test

import (
	"errors"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/cluster"
)

// Two nodes of one CA complete the peer handshake, and so does a front (which
// passes admin requests on); a node of another name is refused by the dialer,
// and a front cannot make either peer configuration.
func TestPeerHandshake(t *testing.T) {
	t.Parallel()
	dir := newCA(t)
	a := load(t, issue(t, dir, cluster.RoleNode, "a", cluster.Options{}))
	b := load(t, issue(t, dir, cluster.RoleNode, "b", cluster.Options{}))
	frontFiles := issue(t, dir, cluster.RoleFront, "f", cluster.Options{})
	front := load(t, frontFiles)

	srv, err := a.PeerListenerConfig()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := b.PeerDialConfig("a")
	if err != nil {
		t.Fatal(err)
	}
	s, c := handshake(t, srv, cli)
	if s.err != nil || c.err != nil {
		t.Fatalf("node to node: server %v, client %v", s.err, c.err)
	}
	if role, name, err := cluster.Peer(s.state); err != nil || role != cluster.RoleNode || name != "b" {
		t.Fatalf("the listener saw %s %q %v", role, name, err)
	}

	fcli, err := front.DialConfig("a")
	if err != nil {
		t.Fatal(err)
	}
	s, c = handshake(t, srv, fcli)
	if s.err != nil || c.err != nil {
		t.Fatalf("front to node's peer listener: server %v, client %v", s.err, c.err)
	}
	if role, name, err := cluster.Peer(s.state); err != nil || role != cluster.RoleFront || name != "f" {
		t.Fatalf("the listener saw %s %q %v", role, name, err)
	}
	wrong, err := b.PeerDialConfig("c")
	if err != nil {
		t.Fatal(err)
	}
	if _, c := handshake(t, srv, wrong); !errors.Is(c.err, cluster.ErrWrongName) {
		t.Fatalf("node a answering for c: %v", c.err)
	}
	if _, err := front.PeerListenerConfig(); !errors.Is(err, cluster.ErrWrongRole) {
		t.Fatalf("a front's peer listener: %v", err)
	}
	if _, err := front.PeerDialConfig("a"); !errors.Is(err, cluster.ErrWrongRole) {
		t.Fatalf("a front dialing a peer: %v", err)
	}
}

package cluster_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/cluster"
)

// tlsServer accepts on 127.0.0.1 with cfg (one configuration, so that its
// session tickets can be resumed) and writes a byte after each handshake.
func tlsServer(t testing.TB, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(time.Minute))
				tc := tls.Server(c, cfg)
				if tc.Handshake() == nil {
					tc.Write([]byte{1})
					io.ReadAll(tc)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dialOnce completes a handshake and reads the server's byte (and with it the
// session ticket).
func dialOnce(t testing.TB, addr string, cfg *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	tc := tls.Client(c, cfg)
	err = tc.Handshake()
	if err == nil {
		_, err = io.ReadFull(tc, make([]byte, 1))
	}
	return tc.ConnectionState(), err
}

// TestResumption: a front's second connection to a node resumes the TLS session
// of its first, with the node's identity checked all the same: a resumed session
// is refused when the front expects another node at that address.
func TestResumption(t *testing.T) {
	t.Parallel()
	dir := newCA(t)
	node := load(t, issue(t, dir, cluster.RoleNode, "a", cluster.Options{}))
	front := load(t, issue(t, dir, cluster.RoleFront, "f", cluster.Options{}))
	addr := tlsServer(t, listenerConfig(t, node))

	first, err := dialOnce(t, addr, dialConfig(t, front, "a"))
	if err != nil || first.DidResume {
		t.Fatalf("first handshake: %v, resumed %v", err, first.DidResume)
	}
	second, err := dialOnce(t, addr, dialConfig(t, front, "a"))
	if err != nil || !second.DidResume {
		t.Fatalf("second handshake: %v, resumed %v; want a resumed session", err, second.DidResume)
	}
	if role, name, err := cluster.Peer(second); err != nil || role != cluster.RoleNode || name != "a" {
		t.Fatalf("a resumed session's peer: %s %q %v", role, name, err)
	}
	if _, err := dialOnce(t, addr, dialConfig(t, front, "b")); !errors.Is(err, cluster.ErrWrongName) {
		t.Fatalf("a session of node a resumed for node b: %v", err)
	}
}

// BenchmarkHandshake: a front's handshake with a node, full and resumed.
func BenchmarkHandshake(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "cluster")
	if _, err := cluster.Init(dir, cluster.Options{}); err != nil {
		b.Fatal(err)
	}
	member := func(role cluster.Role, name string) *cluster.Member {
		if _, err := cluster.Issue(dir, cluster.Request{Role: role, Name: name, Hosts: []string{"127.0.0.1"}}); err != nil {
			b.Fatal(err)
		}
		m, err := cluster.Load(cluster.MemberFiles(dir, role, name), nil)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	node, front := member(cluster.RoleNode, "a"), member(cluster.RoleFront, "f")
	srv, err := node.ListenerConfig()
	if err != nil {
		b.Fatal(err)
	}
	addr := tlsServer(b, srv)
	for _, resumed := range []bool{false, true} {
		b.Run(map[bool]string{false: "full", true: "resumed"}[resumed], func(b *testing.B) {
			for range b.N {
				cfg, err := front.DialConfig("a")
				if err != nil {
					b.Fatal(err)
				}
				if !resumed {
					cfg.ClientSessionCache = nil
				}
				if _, err := dialOnce(b, addr, cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestResumptionExpired: a session is not resumed past the front's certificate's
// expiry: the node's clock is checked on every handshake.
func TestResumptionExpired(t *testing.T) {
	t.Parallel()
	dir := newCA(t)
	var skew atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	nodeFiles := issue(t, dir, cluster.RoleNode, "a", cluster.Options{})
	frontFiles := issue(t, dir, cluster.RoleFront, "f", cluster.Options{Lifetime: time.Hour})
	node, err := cluster.Load(nodeFiles, clock)
	if err != nil {
		t.Fatal(err)
	}
	front := load(t, frontFiles)
	addr := tlsServer(t, listenerConfig(t, node))
	if _, err := dialOnce(t, addr, dialConfig(t, front, "a")); err != nil {
		t.Fatal(err)
	}
	skew.Store(int64(2 * time.Hour))
	if st, err := dialOnce(t, addr, dialConfig(t, front, "a")); err == nil {
		t.Fatalf("a front whose certificate expired was let in (resumed %v)", st.DidResume)
	}
}

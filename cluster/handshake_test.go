package cluster_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/cluster"
)

// newCA makes a cluster CA in a new directory.
func newCA(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cluster")
	if _, err := cluster.Init(dir, cluster.Options{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// issue makes a member in dir and returns its files.
func issue(t *testing.T, dir string, role cluster.Role, name string, opt cluster.Options) cluster.Files {
	t.Helper()
	if _, err := cluster.Issue(dir, cluster.Request{Role: role, Name: name, Hosts: []string{"127.0.0.1", "localhost"}, Options: opt}); err != nil {
		t.Fatal(err)
	}
	return cluster.MemberFiles(dir, role, name)
}

func load(t *testing.T, f cluster.Files) *cluster.Member {
	t.Helper()
	m, err := cluster.Load(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func listenerConfig(t *testing.T, m *cluster.Member) *tls.Config {
	t.Helper()
	c, err := m.ListenerConfig()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func dialConfig(t *testing.T, m *cluster.Member, node string) *tls.Config {
	t.Helper()
	c, err := m.DialConfig(node)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func keyPair(t *testing.T, f cluster.Files) tls.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// rawClient presents f's certificate whatever CAs the server asks for, and
// checks nothing: a peer that tries to get in with credentials it has.
func rawClient(t *testing.T, f cluster.Files) *tls.Config {
	pair := keyPair(t, f)
	return &tls.Config{
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil },
		InsecureSkipVerify:   true,
	}
}

// rawServer presents f's certificate and asks for none.
func rawServer(t *testing.T, f cluster.Files) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{keyPair(t, f)}}
}

// result is one end of a handshake.
type result struct {
	err   error
	state tls.ConnectionState
}

// handshake runs one TLS handshake over loopback. The server writes a byte after
// its handshake and the client reads it, so that a client certificate the server
// refuses (in TLS 1.3, after the client's side of the handshake is done) fails
// the client too.
func handshake(t *testing.T, srv, cli *tls.Config) (server, client result) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Minute)) // against a hang only
		tc := tls.Server(c, srv)
		err = tc.Handshake()
		if err == nil {
			_, err = tc.Write([]byte{1})
		}
		done <- result{err, tc.ConnectionState()}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	tc := tls.Client(c, cli)
	err = tc.Handshake()
	if err == nil {
		_, err = io.ReadFull(tc, make([]byte, 1))
	}
	client = result{err, tc.ConnectionState()}
	c.Close()
	return <-done, client
}

// A front and a node of one CA complete the handshake on TLS 1.3, and each sees
// the other's role and name.
func TestHandshake(t *testing.T) {
	t.Parallel()
	dir := newCA(t)
	node := load(t, issue(t, dir, cluster.RoleNode, "a", cluster.Options{}))
	front := load(t, issue(t, dir, cluster.RoleFront, "f1", cluster.Options{}))
	srv, cli := handshake(t, listenerConfig(t, node), dialConfig(t, front, "a"))
	if srv.err != nil || cli.err != nil {
		t.Fatalf("handshake: node %v, front %v", srv.err, cli.err)
	}
	if cli.state.Version != tls.VersionTLS13 {
		t.Errorf("TLS version %x, want 1.3", cli.state.Version)
	}
	if r, n, err := cluster.Peer(srv.state); r != cluster.RoleFront || n != "f1" || err != nil {
		t.Errorf("the node sees %s %q (%v), want front f1", r, n, err)
	}
	if r, n, err := cluster.Peer(cli.state); r != cluster.RoleNode || n != "a" || err != nil {
		t.Errorf("the front sees %s %q (%v), want node a", r, n, err)
	}
}

func isErr(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

func invalidCert(reason x509.InvalidReason) func(error) bool {
	return func(err error) bool {
		var e x509.CertificateInvalidError
		return errors.As(err, &e) && e.Reason == reason
	}
}

func unknownAuthority(err error) bool {
	var e x509.UnknownAuthorityError
	return errors.As(err, &e)
}

func anyErr(err error) bool { return err != nil }

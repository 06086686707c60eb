package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"
)

// Member is one member's credentials, read by Load: its certificate and key, and
// the cluster CA it trusts. Its methods are safe for concurrent use; the zero
// value is not usable.
type Member struct {
	// Role and Name are the member's identity, from its certificate.
	Role Role
	Name string
	// NotAfter is when the member's certificate expires.
	NotAfter time.Time
	cert     tls.Certificate
	roots    *x509.CertPool
	now      func() time.Time
	// sessions keeps the TLS sessions this member resumed nodes with: a front
	// opens one connection per client session, and a resumed handshake skips the
	// certificates' signatures (the identity checks run on every handshake).
	sessions tls.ClientSessionCache
}

// Load reads a member's files and checks that its certificate and key belong
// together, that the certificate names a member and is signed by the CA in
// f.CA, and that it is valid now (ErrExpired if not). now is the clock of the
// handshakes too; nil is time.Now.
func Load(f Files, now func() time.Time) (*Member, error) {
	if now == nil {
		now = time.Now
	}
	ca, err := readCert(f.CA)
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	if !ca.IsCA {
		return nil, fmt.Errorf("%s is not a CA certificate", f.CA)
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("cluster member: %w", err)
	}
	role, name, err := Identity(pair.Leaf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Cert, err)
	}
	m := &Member{Role: role, Name: name, NotAfter: pair.Leaf.NotAfter, cert: pair, roots: x509.NewCertPool(), now: now,
		sessions: tls.NewLRUClientSessionCache(256)}
	m.roots.AddCert(ca)
	usage := x509.ExtKeyUsageClientAuth
	if role == RoleNode {
		usage = x509.ExtKeyUsageServerAuth
	}
	if err := m.verify(pair.Leaf, usage); err != nil {
		return nil, fmt.Errorf("%s against %s: %w", f.Cert, f.CA, err)
	}
	return m, nil
}

// ListenerConfig returns the TLS configuration of a node's internal listener: TLS
// 1.3, the node's certificate, and a client certificate required, signed by the
// cluster CA, valid, and of the role front. A Member that is not a node gets
// ErrWrongRole.
func (m *Member) ListenerConfig() (*tls.Config, error) {
	if m.Role != RoleNode {
		return nil, fmt.Errorf("%w: a %s does not serve the internal listener", ErrWrongRole, m.Role)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{m.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert, // chain to the CA, validity, client usage
		ClientCAs:    m.roots,
		Time:         m.now,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return expect(cs, RoleFront, "")
		},
	}, nil
}

// DialConfig returns the TLS configuration of a front dialing the node named
// node: TLS 1.3, the front's certificate, and the node's certificate checked to
// be signed by the cluster CA, valid, of the role node and of that name. The
// node's address is not checked (its certificate is its identity), so a node
// keeps its certificate when its address changes. A Member that is not a front
// gets ErrWrongRole.
func (m *Member) DialConfig(node string) (*tls.Config, error) {
	if m.Role != RoleFront {
		return nil, fmt.Errorf("%w: a %s does not dial nodes for sessions", ErrWrongRole, m.Role)
	}
	return m.nodeDialConfig(node)
}

// verify checks that cert is signed by the cluster CA (no intermediates), valid
// now and allowed usage.
func (m *Member) verify(cert *x509.Certificate, usage x509.ExtKeyUsage) error {
	_, err := cert.Verify(x509.VerifyOptions{Roots: m.roots, CurrentTime: m.now(), KeyUsages: []x509.ExtKeyUsage{usage}})
	var invalid x509.CertificateInvalidError
	if errors.As(err, &invalid) && invalid.Reason == x509.Expired {
		return fmt.Errorf("%w: %w", ErrExpired, err)
	}
	return err
}

// expect checks the identity of a verified peer: role, and name unless "".
func expect(cs tls.ConnectionState, role Role, name string) error {
	got, gotName, err := Peer(cs)
	switch {
	case err != nil:
		return err
	case got != role:
		return fmt.Errorf("%w: the peer is %s %q, not a %s", ErrWrongRole, got, gotName, role)
	case name != "" && gotName != name:
		return fmt.Errorf("%w: the peer is %s %q, not %q", ErrWrongName, got, gotName, name)
	}
	return nil
}

// Peer returns the role and name of the cluster member at the other end of a
// connection, from its certificate. It does not verify the certificate: call it on
// a connection whose handshake with ListenerConfig or DialConfig succeeded.
func Peer(cs tls.ConnectionState) (Role, string, error) {
	if len(cs.PeerCertificates) == 0 {
		return "", "", fmt.Errorf("%w: the peer sent no certificate", ErrNoIdentity)
	}
	return Identity(cs.PeerCertificates[0])
}

package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// Nodes also talk to each other: a node copies a seed from the node that built
// it, over the builder's peer listener; node certificates allow client and
// server use. Fronts reach the same listener to pass admin requests on.

// PeerListenerConfig returns the TLS configuration of a node's peer listener:
// TLS 1.3, the node's certificate, and a client certificate required, signed by
// the cluster CA, valid, and of the role node (a node copying a seed) or front
// (a front passing an admin request on); what each may ask is the listener's
// to check (Peer). A Member that is not a node gets ErrWrongRole.
func (m *Member) PeerListenerConfig() (*tls.Config, error) {
	if m.Role != RoleNode {
		return nil, fmt.Errorf("%w: a %s has no peer listener", ErrWrongRole, m.Role)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{m.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    m.roots,
		Time:         m.now,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if expect(cs, RoleFront, "") == nil {
				return nil
			}
			return expect(cs, RoleNode, "")
		},
	}, nil
}

// PeerDialConfig returns the TLS configuration of a node dialing the peer
// listener of the node named node, checked as DialConfig checks it. A Member
// that is not a node gets ErrWrongRole.
func (m *Member) PeerDialConfig(node string) (*tls.Config, error) {
	if m.Role != RoleNode {
		return nil, fmt.Errorf("%w: a %s does not dial peer listeners", ErrWrongRole, m.Role)
	}
	return m.nodeDialConfig(node)
}

// nodeDialConfig is the client configuration for the node named node: TLS 1.3,
// this member's certificate, and the node's certificate checked to be signed by
// the cluster CA, valid, of the role node and of that name (not its address).
func (m *Member) nodeDialConfig(node string) (*tls.Config, error) {
	if !ValidName(node) {
		return nil, fmt.Errorf("%w: node name %q", ErrInvalid, node)
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		Certificates:       []tls.Certificate{m.cert},
		Time:               m.now,
		ClientSessionCache: m.sessions,
		// The node's name keys its resumable session (an address may change
		// hands, and one host may hold several nodes' listeners); it is not
		// checked against the certificate's DNS names (InsecureSkipVerify).
		ServerName: node,
		// The default verification checks the address against the SANs; the
		// chain and the identity are checked in VerifyConnection instead.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("node sent no certificate")
			}
			if err := m.verify(cs.PeerCertificates[0], x509.ExtKeyUsageServerAuth); err != nil {
				return fmt.Errorf("node %q: %w", node, err)
			}
			return expect(cs, RoleNode, node)
		},
	}, nil
}

package proxy

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
)

// alpnPostgres is the ALPN protocol Postgres 17 clients send with direct TLS.
const alpnPostgres = "postgresql"

// errSSLRequired refuses a plaintext session when TLS is required.
var errSSLRequired = errors.New("SSL connection is required")

// maybeDirectTLS peeks at the first byte: 0x16 starts a TLS handshake without an
// SSLRequest (sslnegotiation=direct). It returns the connection to go on with,
// which keeps the peeked byte for the next read.
func (s *Server) maybeDirectTLS(conn net.Conn) (net.Conn, bool, error) {
	br := bufio.NewReaderSize(conn, 16)
	first, err := br.Peek(1)
	if err != nil {
		return conn, false, err
	}
	pc := &peekedConn{Conn: conn, r: br}
	if first[0] != 0x16 {
		return pc, false, nil
	}
	tc, err := s.handshake(pc, true)
	if err != nil {
		return pc, false, err
	}
	return tc, true, nil
}

// handshake runs the server side of TLS on conn (within conn's deadline). Direct TLS
// requires the client to offer ALPN "postgresql", as Postgres does.
func (s *Server) handshake(conn net.Conn, direct bool) (net.Conn, error) {
	tc := tls.Server(conn, s.cfg.TLS)
	if err := tc.Handshake(); err != nil {
		return conn, fmt.Errorf("tls handshake: %w", err)
	}
	proto := tc.ConnectionState().NegotiatedProtocol
	if direct && proto != alpnPostgres {
		return tc, fmt.Errorf("%w: direct SSL connection without ALPN protocol negotiation extension", errProtocol)
	}
	if proto != "" && !slices.Contains(s.cfg.TLS.NextProtos, proto) {
		return tc, fmt.Errorf("%w: unexpected ALPN protocol %q", errProtocol, proto)
	}
	return tc, nil
}

// peekedConn is a connection whose first bytes went through a bufio.Reader.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) {
	if c.r.Buffered() > 0 {
		return c.r.Read(p)
	}
	return c.Conn.Read(p)
}

// clientCerts reports whether clients must show a certificate (a node's fronts):
// then every client, on a unix socket too, must come over TLS.
func (s *Server) clientCerts() bool {
	return s.cfg.TLS != nil && (s.cfg.TLS.ClientAuth == tls.RequireAnyClientCert || s.cfg.TLS.ClientAuth == tls.RequireAndVerifyClientCert)
}

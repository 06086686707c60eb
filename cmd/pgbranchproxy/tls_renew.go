package main

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// renewBefore is how long before its end --tls-auto issues a new server certificate.
const renewBefore = 30 * 24 * time.Hour

// ensure leaves a CA and a server certificate in f.dir that serve can use at
// listen: made the first time, and the server certificate issued again, by the
// same CA, when it does not name every one of serverNames(listen) (serve moved
// from loopback to the host's network, as serve.conf suggests for remote clients)
// or ends within renewBefore. Clients keep verifying with the same ca.crt.
func (f tlsFiles) ensure(listen string) error {
	leaf, err := readCert(f.path("server.crt"))
	if errors.Is(err, os.ErrNotExist) {
		return f.generate(listen)
	}
	if err != nil {
		return err
	}
	// A key that is not the certificate's (a start that stopped between writing
	// the two) is issued again too, rather than refusing every start after.
	_, pairErr := tls.LoadX509KeyPair(f.path("server.crt"), f.path("server.key"))
	if pairErr == nil && certNames(leaf, serverNames(listen)) && time.Until(leaf.NotAfter) > renewBefore {
		return nil
	}
	ca, err := readCert(f.path("ca.crt"))
	if err != nil {
		return fmt.Errorf("issue a server certificate for %s: %w", listen, err)
	}
	caKey, err := readECKey(f.path("ca.key"))
	if err != nil {
		return fmt.Errorf("issue a server certificate for %s: %w", listen, err)
	}
	return f.issue(ca, caKey, listen)
}

// serverNames are the names a --tls-auto certificate is for: localhost, the
// loopback addresses, this host's name and the listen host, or, when that is the
// unspecified address or none (":6432"), every address of this host's interfaces.
func serverNames(listen string) []string {
	names := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil && h != "" {
		names = append(names, h)
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil || host == "localhost" {
		return names
	}
	ip := net.ParseIP(host)
	switch {
	case host == "": // ":6432" listens on every address, as 0.0.0.0 does
		return append(names, interfaceAddrs()...)
	case ip == nil:
		return append(names, host)
	case ip.IsUnspecified():
		return append(names, interfaceAddrs()...)
	case !ip.IsLoopback():
		return append(names, ip.String())
	}
	return names
}

// interfaceAddrs are this host's addresses that a client on another host may
// connect to (not loopback, not link-local, which needs a zone).
func interfaceAddrs() []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() {
			out = append(out, n.IP.String())
		}
	}
	return out
}

// certNames reports whether c is valid for every one of names.
func certNames(c *x509.Certificate, names []string) bool {
	for _, n := range names {
		if c.VerifyHostname(n) != nil {
			return false
		}
	}
	return true
}

func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, _ := pem.Decode(b)
	if p == nil || p.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: not a PEM certificate", path)
	}
	return x509.ParseCertificate(p.Bytes)
}

func readECKey(path string) (*ecdsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, _ := pem.Decode(b)
	if p == nil {
		return nil, fmt.Errorf("%s: not a PEM key", path)
	}
	return x509.ParseECPrivateKey(p.Bytes)
}

package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A --tls-auto certificate made while serve listened on loopback is issued again,
// by the same CA, for the address serve listens on later: clients on other hosts
// verify it with the ca.crt they already have (sslmode=verify-full).
func TestTLSAutoFollowsListen(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := loadTLS("", "", true, dir, "127.0.0.1:6432"); err != nil {
		t.Fatal(err)
	}
	f := tlsFiles{filepath.Join(dir, "tls")}
	caBefore, _ := os.ReadFile(f.path("ca.crt"))
	_, fpLoop, err := loadTLS("", "", true, dir, "127.0.0.1:6432")
	if err != nil {
		t.Fatal(err)
	}
	_, fpNet, err := loadTLS("", "", true, dir, "192.0.2.7:6432")
	if err != nil {
		t.Fatal(err)
	}
	caAfter, _ := os.ReadFile(f.path("ca.crt"))
	if !bytes.Equal(caBefore, caAfter) {
		t.Fatal("the CA changed: clients would need a new sslrootcert")
	}
	if fpNet == fpLoop {
		t.Fatal("server certificate not issued again for the new listen address")
	}
	ca, err := readCert(f.path("ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := readCert(f.path("server.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, host := range []string{"192.0.2.7", "localhost", "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Errorf("verify-full to %s: %v", host, err)
		}
	}
	// Unchanged listen: the same certificate.
	if _, fp, err := loadTLS("", "", true, dir, "192.0.2.7:6432"); err != nil || fp != fpNet {
		t.Errorf("restart on the same address issued a new certificate (%v)", err)
	}
}

// On the unspecified address the certificate names this host's addresses.
// So does it on no host at all (":6432"), which listens on every address too.
func TestTLSAutoAllAddresses(t *testing.T) {
	if len(interfaceAddrs()) == 0 {
		t.Skip("this host has no address but loopback")
	}
	for _, listen := range []string{"0.0.0.0:6432", "[::]:6432", ":6432"} {
		names := serverNames(listen)
		for _, a := range interfaceAddrs() {
			if !slices.Contains(names, a) {
				t.Errorf("serverNames(%s) = %v, missing %s", listen, names, a)
			}
		}
	}
}

// A server key that is not the certificate's, as a start stopped between writing
// the two while issuing again leaves them, is issued again by the next start
// rather than refusing every start after; and the key keeps mode 0600.
func TestTLSAutoMismatchedKey(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := loadTLS("", "", true, dir, "127.0.0.1:6432"); err != nil {
		t.Fatal(err)
	}
	f := tlsFiles{filepath.Join(dir, "tls")}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.path("server.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: mustMarshalEC(key)}), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(f.path("server.key"), 0o644)
	if _, _, err := loadTLS("", "", true, dir, "127.0.0.1:6432"); err != nil {
		t.Fatalf("start after a half-written issue: %v", err)
	}
	if st, err := os.Stat(f.path("server.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("server.key: %v, %v; want mode 0600", st.Mode(), err)
	}
}

package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/cluster"
)

// tlsFiles are where --tls-auto keeps its CA and server certificate.
type tlsFiles struct{ dir string }

func (f tlsFiles) path(name string) string { return filepath.Join(f.dir, name) }

// loadTLS builds the server's TLS configuration from --tls-cert/--tls-key, or from
// --tls-auto (a CA and a server certificate it signed, made once and kept in the
// state directory). It returns nil when neither is given.
func loadTLS(certFile, keyFile string, auto bool, stateDir, listen string) (*tls.Config, string, error) {
	switch {
	case certFile != "" || keyFile != "":
		if certFile == "" || keyFile == "" {
			return nil, "", errors.New("--tls-cert and --tls-key go together")
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, "", fmt.Errorf("load TLS certificate: %w", err)
		}
		return &tls.Config{Certificates: []tls.Certificate{cert}}, fingerprint(cert), nil
	case auto:
		f := tlsFiles{filepath.Join(stateDir, "tls")}
		if err := f.ensure(listen); err != nil {
			return nil, "", fmt.Errorf("make TLS certificate: %w", err)
		}
		cert, err := tls.LoadX509KeyPair(f.path("server.crt"), f.path("server.key"))
		if err != nil {
			return nil, "", err
		}
		return &tls.Config{Certificates: []tls.Certificate{cert}}, fingerprint(cert), nil
	}
	return nil, "", nil
}

// memberTLS is a node's listener configuration, with its cluster certificate's
// fingerprint for the log.
func memberTLS(m *cluster.Member) (*tls.Config, string, error) {
	cfg, err := m.ListenerConfig()
	if err != nil || len(cfg.Certificates) == 0 {
		return cfg, "", err
	}
	return cfg, fingerprint(cfg.Certificates[0]), nil
}

func fingerprint(c tls.Certificate) string {
	if len(c.Certificate) == 0 {
		return ""
	}
	sum := sha256.Sum256(c.Certificate[0])
	return hex.EncodeToString(sum[:])
}

// generate makes a CA (ca.crt, for clients' sslrootcert) and a server certificate
// it signs (issue).
func (f tlsFiles) generate(listen string) error {
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "pgbranchproxy local CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := cluster.WritePEM(f.path("ca.key"), "EC PRIVATE KEY", mustMarshalEC(caKey), 0o600, true); err != nil {
		return err
	}
	if err := cluster.WritePEM(f.path("ca.crt"), "CERTIFICATE", caDER, 0o644, true); err != nil {
		return err
	}
	return f.issue(ca, caKey, listen)
}

// issue makes a server certificate signed by ca for serverNames(listen).
func (f tlsFiles) issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, listen string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "pgbranchproxy"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(2, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range serverNames(listen) {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := cluster.WritePEM(f.path("server.key"), "EC PRIVATE KEY", mustMarshalEC(key), 0o600, true); err != nil {
		return err
	}
	// Written last: its presence means the set is complete.
	return cluster.WritePEM(f.path("server.crt"), "CERTIFICATE", der, 0o644, true)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func mustMarshalEC(k *ecdsa.PrivateKey) []byte {
	b, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		panic(err) // only fails for curves Go does not support
	}
	return b
}

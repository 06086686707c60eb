package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// Default lifetimes of the certificates Init and Issue make.
const (
	DefaultCALifetime     = 10 * 365 * 24 * time.Hour
	DefaultMemberLifetime = 365 * 24 * time.Hour
)

// backdate is how long before its issue a certificate becomes valid, so that a
// host whose clock is somewhat behind the issuer's accepts it at once.
const backdate = time.Hour

// Options are what Init and Issue take besides the directory. The zero value
// means the default lifetime and the system clock.
type Options struct {
	// Lifetime is how long the certificate is valid after its issue; 0 is the
	// default (DefaultCALifetime, DefaultMemberLifetime). A member's certificate
	// never outlives the CA: its lifetime is cut at the CA's expiry.
	Lifetime time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

func (o Options) now() time.Time {
	if o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

func (o Options) lifetime(def time.Duration) (time.Duration, error) {
	switch {
	case o.Lifetime < 0:
		return 0, fmt.Errorf("%w: negative lifetime %s", ErrInvalid, o.Lifetime)
	case o.Lifetime == 0:
		return def, nil
	}
	return o.Lifetime, nil
}

// Issued describes a certificate that Init or Issue wrote. For the CA, Role is
// empty, Name is the CA's common name, and KeyFile is the CA's key.
type Issued struct {
	Role                Role
	Name                string
	Hosts               []string
	CAFile              string
	CertFile, KeyFile   string
	NotBefore, NotAfter time.Time
	// Fingerprint is the hex SHA-256 of the certificate's DER bytes.
	Fingerprint string
}

// Init makes a cluster CA in dir (created with mode 0700 if missing): an ECDSA
// P-256 key, dir/ca.key (mode 0600), and its self-signed certificate, dir/ca.crt.
// A directory that has either file already is left alone and the error wraps
// ErrExists.
func Init(dir string, opt Options) (Issued, error) {
	life, err := opt.lifetime(DefaultCALifetime)
	if err != nil {
		return Issued{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Issued{}, err
	}
	certFile, keyFile := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	for _, f := range []string{keyFile, certFile} {
		if _, err := os.Lstat(f); !errors.Is(err, fs.ErrNotExist) {
			return Issued{}, fmt.Errorf("%w: %s (a cluster CA is made once; its members trust it)", ErrExists, f)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Issued{}, err
	}
	now := opt.now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "pgbranchproxy cluster CA " + randomHex(4)},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(life),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Issued{}, fmt.Errorf("make cluster CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der) // its times, to the second
	if err != nil {
		return Issued{}, err
	}
	if err := writeKeyAndCert(keyFile, certFile, key, der, false); err != nil {
		return Issued{}, err
	}
	return Issued{Name: cert.Subject.CommonName, CAFile: certFile, CertFile: certFile, KeyFile: keyFile,
		NotBefore: cert.NotBefore, NotAfter: cert.NotAfter, Fingerprint: fingerprint(der)}, nil
}

// writeKeyAndCert writes a key (mode 0600) and then its certificate (0644): the
// key first, so that a certificate on disk always has its key. Unless replace,
// taking the key's name decides who owns it; a certificate that then cannot be
// written takes the key away again.
func writeKeyAndCert(keyFile, certFile string, key *ecdsa.PrivateKey, der []byte, replace bool) error {
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := WritePEM(keyFile, "PRIVATE KEY", pkcs8, 0o600, replace); err != nil {
		return err
	}
	if err := WritePEM(certFile, "CERTIFICATE", der, 0o644, replace); err != nil {
		if !replace {
			os.Remove(keyFile)
		}
		return err
	}
	return nil
}

// loadCA reads the cluster CA of dir, its certificate and key, and checks that
// they belong together.
func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cert, err := readCert(filepath.Join(dir, CACertFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("%w in %s: make one with cluster init", ErrNoCA, dir)
	}
	if err != nil {
		return nil, nil, err
	}
	key, err := readKey(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("cluster CA key: %w", err)
	}
	if !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, nil, fmt.Errorf("%s and %s are not one CA's certificate and key", CACertFile, CAKeyFile)
	}
	return cert, key, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Request asks Issue for one member's certificate.
type Request struct {
	Role Role
	Name string
	// Hosts are the member's DNS names and IP addresses, written as SANs.
	Hosts []string
	// Force replaces the files of a member of the same role and name.
	Force bool
	Options
}

// Issue makes a member's key and certificate, signed by the cluster CA in dir,
// and writes them to MemberFiles(dir, req.Role, req.Name), the key with mode
// 0600. Names are unique per role: a front and a node may share one. A member
// that exists already is left alone and the error wraps ErrExists, unless
// req.Force. A dir without a CA is ErrNoCA, an expired CA ErrExpired.
func Issue(dir string, req Request) (Issued, error) {
	role, err := ParseRole(string(req.Role))
	if err != nil {
		return Issued{}, err
	}
	if !ValidName(req.Name) {
		return Issued{}, fmt.Errorf("%w: member name %q: use 1-63 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit", ErrInvalid, req.Name)
	}
	dns, ips, err := splitHosts(req.Hosts)
	if err != nil {
		return Issued{}, err
	}
	life, err := req.lifetime(DefaultMemberLifetime)
	if err != nil {
		return Issued{}, err
	}
	ca, caKey, err := loadCA(dir)
	if err != nil {
		return Issued{}, err
	}
	now := req.now()
	if now.After(ca.NotAfter) {
		return Issued{}, fmt.Errorf("%w: the cluster CA in %s expired on %s", ErrExpired, dir, ca.NotAfter.UTC().Format("2006-01-02"))
	}
	files := MemberFiles(dir, role, req.Name)
	if !req.Force {
		if _, err := os.Lstat(files.Cert); err == nil {
			return Issued{}, fmt.Errorf("%w: %s %q (%s)", ErrExists, role, req.Name, files.Cert)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Issued{}, err
	}
	tmpl := memberTemplate(role, req.Name, dns, ips)
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-backdate), now.Add(life)
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return Issued{}, fmt.Errorf("sign %s %q: %w", role, req.Name, err)
	}
	cert, err := x509.ParseCertificate(der) // its times, to the second
	if err != nil {
		return Issued{}, err
	}
	if err := writeKeyAndCert(files.Key, files.Cert, key, der, req.Force); err != nil {
		return Issued{}, err
	}
	return Issued{Role: role, Name: req.Name, Hosts: hostList(dns, ips), CAFile: filepath.Join(dir, CACertFile),
		CertFile: files.Cert, KeyFile: files.Key, NotBefore: cert.NotBefore, NotAfter: cert.NotAfter,
		Fingerprint: fingerprint(der)}, nil
}

// memberTemplate is a member's certificate without its validity period. Both
// roles may be TLS clients (a node will dial other nodes for seeds), so what
// keeps a node from acting as a front is the role in the URI SAN, which the
// listener checks; only a node may be a TLS server.
func memberTemplate(role Role, name string, dns []string, ips []net.IP) *x509.Certificate {
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if role == RoleNode {
		usage = append(usage, x509.ExtKeyUsageServerAuth)
	}
	return &x509.Certificate{
		SerialNumber: serial(),
		Subject: pkix.Name{CommonName: name, OrganizationalUnit: []string{string(role)},
			Organization: []string{"pgbranchproxy cluster"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: usage,
		URIs:        []*url.URL{identityURI(role, name)},
		DNSNames:    dns,
		IPAddresses: ips,
	}
}

// splitHosts sorts hosts into DNS names (lowercased) and IP addresses.
func splitHosts(hosts []string) ([]string, []net.IP, error) {
	var dns []string
	var ips []net.IP
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
			continue
		}
		h = strings.ToLower(h)
		if !validHostname(h) {
			return nil, nil, fmt.Errorf("%w: host %q is neither an IP address nor a DNS name", ErrInvalid, h)
		}
		dns = append(dns, h)
	}
	return dns, ips, nil
}

// validHostname reports whether h is a DNS name: dot-separated labels of 1-63
// characters of a-z, 0-9, '-' and '_', not starting or ending with '-'.
func validHostname(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func hostList(dns []string, ips []net.IP) []string {
	out := append([]string{}, dns...)
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}

package cluster_test

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/cluster"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// Keys are 0600, certificates 0644, the directory Init makes 0700; no temporary
// file is left behind.
func TestFileModes(t *testing.T) {
	t.Parallel()
	dir := newCA(t)
	f := issue(t, dir, cluster.RoleNode, "a", cluster.Options{})
	for path, want := range map[string]os.FileMode{
		dir: 0o700, filepath.Join(dir, cluster.CAKeyFile): 0o600, filepath.Join(dir, cluster.CACertFile): 0o644,
		f.Key: 0o600, f.Cert: 0o644,
	} {
		if got := mode(t, path); got != want {
			t.Errorf("%s: mode %v, want %v", path, got, want)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 4 {
		t.Errorf("files in the cluster directory: %v, %v (want ca.crt, ca.key, node-a.crt, node-a.key)", entries, err)
	}
}

// A member's certificate carries its role and name (URI SAN, OU, CN) and its
// hosts; the CA lives 10 years and members 1 year by default, a member's own
// lifetime is kept, and none outlives the CA.
func TestCertificates(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	dir := filepath.Join(t.TempDir(), "c")
	ca, err := cluster.Init(dir, cluster.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	caCert := readCert(t, ca.CertFile)
	if !caCert.IsCA || !caCert.NotAfter.Equal(now.Add(cluster.DefaultCALifetime)) || caCert.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("CA: IsCA %v, expires %s, key %s", caCert.IsCA, caCert.NotAfter, caCert.PublicKeyAlgorithm)
	}
	got, err := cluster.Issue(dir, cluster.Request{Role: cluster.RoleNode, Name: "node-1.dc2",
		Hosts: []string{"Node-1.Internal", "10.0.0.7", "::1"}, Options: cluster.Options{Now: clock}})
	if err != nil {
		t.Fatal(err)
	}
	c := readCert(t, got.CertFile)
	if len(c.URIs) != 1 || c.URIs[0].String() != "pgbranch://node/node-1.dc2" || c.Subject.CommonName != "node-1.dc2" ||
		len(c.Subject.OrganizationalUnit) != 1 || c.Subject.OrganizationalUnit[0] != "node" {
		t.Errorf("identity: URIs %v, CN %q, OU %v", c.URIs, c.Subject.CommonName, c.Subject.OrganizationalUnit)
	}
	if len(c.DNSNames) != 1 || c.DNSNames[0] != "node-1.internal" || len(c.IPAddresses) != 2 || c.IPAddresses[0].String() != "10.0.0.7" {
		t.Errorf("hosts: DNS %v, IPs %v", c.DNSNames, c.IPAddresses)
	}
	if err := c.CheckSignatureFrom(caCert); err != nil || !c.NotAfter.Equal(now.Add(cluster.DefaultMemberLifetime)) || !got.NotAfter.Equal(c.NotAfter) {
		t.Errorf("member: signature %v, expires %s (reported %s)", err, c.NotAfter, got.NotAfter)
	}
	for _, tc := range []struct {
		life time.Duration
		want time.Time
	}{{30 * 24 * time.Hour, now.Add(30 * 24 * time.Hour)}, {20 * cluster.DefaultCALifetime, caCert.NotAfter}} {
		got, err := cluster.Issue(dir, cluster.Request{Role: cluster.RoleFront, Name: "f", Force: true, Options: cluster.Options{Now: clock, Lifetime: tc.life}})
		if err != nil || !readCert(t, got.CertFile).NotAfter.Equal(tc.want) {
			t.Errorf("lifetime %s: %v, expires %s, want %s", tc.life, err, got.NotAfter, tc.want)
		}
	}
}

// Init refuses a directory with a CA, Issue a member that exists (unless Force),
// an unknown role, a bad name or host, a directory without a CA and an expired CA,
// and none of them changes a file.
func TestIssueRefuses(t *testing.T) {
	t.Parallel()
	dir := newCA(t)
	caBefore := readCert(t, filepath.Join(dir, cluster.CACertFile))
	if _, err := cluster.Init(dir, cluster.Options{}); !errors.Is(err, cluster.ErrExists) {
		t.Errorf("second Init: %v", err)
	}
	if !readCert(t, filepath.Join(dir, cluster.CACertFile)).Equal(caBefore) {
		t.Error("second Init changed the CA")
	}
	f := issue(t, dir, cluster.RoleNode, "a", cluster.Options{})
	first := readCert(t, f.Cert)
	past := func() time.Time { return time.Now().Add(-48 * time.Hour) }
	oldCA := filepath.Join(t.TempDir(), "old")
	if _, err := cluster.Init(oldCA, cluster.Options{Now: past, Lifetime: time.Hour}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dir  string
		req  cluster.Request
		want error
	}{
		{"duplicate", dir, cluster.Request{Role: cluster.RoleNode, Name: "a"}, cluster.ErrExists},
		{"unknown role", dir, cluster.Request{Role: "admin", Name: "x"}, cluster.ErrInvalid},
		{"no role", dir, cluster.Request{Name: "x"}, cluster.ErrInvalid},
		{"name with a slash", dir, cluster.Request{Role: cluster.RoleNode, Name: "../ca"}, cluster.ErrInvalid},
		{"uppercase name", dir, cluster.Request{Role: cluster.RoleNode, Name: "A"}, cluster.ErrInvalid},
		{"empty name", dir, cluster.Request{Role: cluster.RoleNode}, cluster.ErrInvalid},
		{"bad host", dir, cluster.Request{Role: cluster.RoleNode, Name: "x", Hosts: []string{"a b"}}, cluster.ErrInvalid},
		{"negative lifetime", dir, cluster.Request{Role: cluster.RoleNode, Name: "x", Options: cluster.Options{Lifetime: -time.Hour}}, cluster.ErrInvalid},
		{"no CA", t.TempDir(), cluster.Request{Role: cluster.RoleNode, Name: "x"}, cluster.ErrNoCA},
		{"expired CA", oldCA, cluster.Request{Role: cluster.RoleNode, Name: "x"}, cluster.ErrExpired},
	}
	for _, tc := range tests {
		if _, err := cluster.Issue(tc.dir, tc.req); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if !readCert(t, f.Cert).Equal(first) {
		t.Error("a refused Issue changed the member")
	}
	if _, err := os.Stat(cluster.MemberFiles(dir, cluster.RoleNode, "x").Key); !os.IsNotExist(err) {
		t.Errorf("a refused Issue left a key: %v", err)
	}
	got, err := cluster.Issue(dir, cluster.Request{Role: cluster.RoleNode, Name: "a", Force: true})
	if err != nil || readCert(t, f.Cert).Equal(first) {
		t.Fatalf("Issue with Force: %v (certificate replaced: %v)", err, !readCert(t, f.Cert).Equal(first))
	}
	if m := load(t, f); m.Name != "a" || m.Role != cluster.RoleNode || !m.NotAfter.Equal(got.NotAfter) {
		t.Errorf("the replaced member loads as %s %q expiring %s", m.Role, m.Name, m.NotAfter)
	}
	// A front may have a node's name: names are unique per role.
	issue(t, dir, cluster.RoleFront, "a", cluster.Options{})
}

// Eight Inits of one directory at once make one CA, and eight Issues of one
// member one member, whose certificate and key belong together.
func TestConcurrentInitAndIssue(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "c")
	race := func(do func() error) (ok, exists int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				err := do()
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, cluster.ErrExists):
					exists++
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		return ok, exists
	}
	if ok, exists := race(func() error { _, err := cluster.Init(dir, cluster.Options{}); return err }); ok != 1 || exists != 7 {
		t.Errorf("Init: %d made a CA, %d found one", ok, exists)
	}
	if ok, exists := race(func() error {
		_, err := cluster.Issue(dir, cluster.Request{Role: cluster.RoleNode, Name: "a"})
		return err
	}); ok != 1 || exists != 7 {
		t.Errorf("Issue: %d made the member, %d found it", ok, exists)
	}
	load(t, cluster.MemberFiles(dir, cluster.RoleNode, "a"))
}

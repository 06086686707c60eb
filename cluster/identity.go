package cluster

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"strings"
)

// Role is what a member does in the cluster. The zero value is no role.
type Role string

// The roles a member certificate can have.
const (
	// RoleFront accepts clients and dials nodes.
	RoleFront Role = "front"
	// RoleNode runs branches and accepts sessions from fronts.
	RoleNode Role = "node"
)

// identityScheme is the scheme of the URI SAN that names a member.
const identityScheme = "pgbranch"

// ParseRole returns the role named s, or an error wrapping ErrInvalid.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleFront, RoleNode:
		return r, nil
	}
	return "", fmt.Errorf("%w: unknown role %q (want front or node)", ErrInvalid, s)
}

// ValidName reports whether s can name a member: 1-63 characters of a-z, 0-9,
// '.', '_' and '-', starting with a letter or digit. Names become file names and
// URI paths, so '/', NUL, uppercase and a leading '.' never pass.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case (c == '-' || c == '.' || c == '_') && i > 0:
		default:
			return false
		}
	}
	return true
}

// identityURI is the URI SAN of a member: pgbranch://<role>/<name>.
func identityURI(role Role, name string) *url.URL {
	return &url.URL{Scheme: identityScheme, Host: string(role), Path: "/" + name}
}

// Identity returns the role and name a member certificate carries in its
// pgbranch:// URI SAN. It does not check who signed the certificate.
func Identity(cert *x509.Certificate) (Role, string, error) {
	var found *url.URL
	for _, u := range cert.URIs {
		if u.Scheme != identityScheme {
			continue
		}
		if found != nil {
			return "", "", fmt.Errorf("%w: more than one %s:// URI", ErrNoIdentity, identityScheme)
		}
		found = u
	}
	if found == nil {
		return "", "", ErrNoIdentity
	}
	role, err := ParseRole(found.Host)
	name := strings.TrimPrefix(found.Path, "/")
	if err != nil || !ValidName(name) || found.RawQuery != "" || found.Fragment != "" || found.User != nil {
		return "", "", fmt.Errorf("%w: malformed %q", ErrNoIdentity, found)
	}
	return role, name, nil
}

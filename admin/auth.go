package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
)

// Roles of admin tokens.
const (
	// RoleAdmin may do everything.
	RoleAdmin = "admin"
	// RoleCI may create, reset, destroy and read the branches whose names start
	// with its prefix, and read what it needs to connect to them (Discover routes).
	RoleCI = "ci"
	// RoleRead may read lists, info, metrics and the audit log.
	RoleRead = "read"
)

// Names that no stored token may take.
const (
	// LocalActor is who acts through the admin socket, with every permission.
	LocalActor = "local"
	// BootstrapName is the name of the token given by --admin-token (role admin).
	BootstrapName = "bootstrap"
)

// TokenPrefix starts every token this package makes, so a leaked one is recognizable.
const TokenPrefix = "pgbp_"

// Need is what a route asks of its caller. The zero value is Public.
type Need int

const (
	// Public routes need no token (health checks).
	Public Need = iota
	// Read routes need role read or admin: lists, info, metrics.
	Read
	// Discover routes describe what a client needs to connect to a branch (the
	// sources, where the proxy listens): every role, ci included.
	Discover
	// BranchRead routes need role read or admin, or role ci when every branch the
	// request names starts with the token's prefix; a ci token may also call one
	// that names no branch (a list), and the handler shows it only its own.
	BranchRead
	// BranchWrite routes need role admin, or role ci when the request names
	// branches and every one starts with the token's prefix.
	BranchWrite
	// Admin routes need role admin.
	Admin
)

// Caller is who makes a request: a token, or LocalActor on the admin socket.
// The zero value is no one.
type Caller struct {
	Name   string
	Role   string
	Prefix string // role ci only
}

// Owns reports whether c may act on branch name under a branch need.
func (c Caller) Owns(name string) bool {
	switch c.Role {
	case RoleAdmin:
		return true
	case RoleCI:
		return c.Prefix != "" && strings.HasPrefix(name, c.Prefix)
	}
	return false
}

// allows reports whether c may call a route with need n on the named branches.
func (c Caller) allows(n Need, branches []string) bool {
	switch n {
	case Public:
		return true
	case Read:
		return c.Role == RoleAdmin || c.Role == RoleRead
	case Discover:
		return c.Role == RoleAdmin || c.Role == RoleRead || c.Role == RoleCI
	case BranchRead, BranchWrite:
		if c.Role == RoleAdmin || (n == BranchRead && c.Role == RoleRead) {
			return true
		}
		if c.Role != RoleCI || (n == BranchWrite && len(branches) == 0) {
			return false
		}
		for _, b := range branches {
			if !c.Owns(b) {
				return false
			}
		}
		return true
	case Admin:
		return c.Role == RoleAdmin
	}
	return false
}

func (c Caller) String() string {
	if c.Role == RoleCI {
		return fmt.Sprintf("token %q (role ci, prefix %q)", c.Name, c.Prefix)
	}
	if c.Name == LocalActor {
		return LocalActor
	}
	return fmt.Sprintf("token %q (role %s)", c.Name, c.Role)
}

type callerKey struct{}

// CallerFrom returns the caller of the request whose context is ctx, as the
// route wrapper found it; the zero Caller outside a route.
func CallerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// NewSecret returns a fresh token secret: TokenPrefix and 256 random bits.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// HashSecret is what the catalog keeps of a token: the SHA-256 of its secret.
func HashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// authenticate finds the caller that the request's bearer token belongs to.
// ok is false when there is no token or it matches none; err when the
// tokens could not be read. Tokens are read from the store every time, so a
// removed token stops working at once.
func (a *API) authenticate(r *http.Request) (c Caller, ok bool, err error) {
	scheme, secret, found := strings.Cut(r.Header.Get("Authorization"), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") || secret == "" { // the scheme's case is free (RFC 9110)
		return Caller{}, false, nil
	}
	got := HashSecret(secret)
	// The bootstrap token works even when the catalog cannot be read.
	if a.bootstrap != nil && subtle.ConstantTimeCompare(got, a.bootstrap) == 1 {
		return Caller{Name: BootstrapName, Role: RoleAdmin}, true, nil
	}
	// Compare with every stored token, each in constant time, without stopping at a match.
	tokens, err := a.store.Tokens(r.Context())
	if err != nil {
		return Caller{}, false, err
	}
	for _, t := range tokens {
		if subtle.ConstantTimeCompare(got, t.Hash) == 1 {
			c, ok = Caller{Name: t.Name, Role: t.Role, Prefix: t.Prefix}, true
		}
	}
	return c, ok, nil
}

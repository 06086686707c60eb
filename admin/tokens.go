package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// NewToken is the body of POST /v1/tokens.
type NewToken struct {
	Name   string `json:"name"`
	Role   string `json:"role"`
	Prefix string `json:"prefix,omitempty"`
}

// TokenInfo describes a token, without its secret, as GET /v1/tokens lists it.
type TokenInfo struct {
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	Prefix    string    `json:"prefix,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	// Flag is set for the token given by --admin-token, which lives in no catalog.
	Flag bool `json:"flag,omitempty"`
}

// CreatedToken is the answer to POST /v1/tokens: the only time the secret is shown.
type CreatedToken struct {
	TokenInfo
	Token string `json:"token"`
}

// Validate checks a token request: a short lower-case name that is not reserved, a
// known role, and a prefix for ci only, made of branch-name characters.
func (t NewToken) Validate() error {
	if !validTokenName(t.Name) {
		return fmt.Errorf("token name %q: want 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit: %w", t.Name, branches.ErrInvalid)
	}
	if t.Name == LocalActor || t.Name == BootstrapName {
		return fmt.Errorf("token name %q is reserved: %w", t.Name, branches.ErrInvalid)
	}
	switch t.Role {
	case RoleAdmin, RoleRead:
		if t.Prefix != "" {
			return fmt.Errorf("--prefix is for role ci only: %w", branches.ErrInvalid)
		}
	case RoleCI:
		if t.Prefix == "" || !router.ValidBranchName(t.Prefix) {
			return fmt.Errorf("role ci needs a --prefix that starts branch names (such as pr-), not %q: %w", t.Prefix, branches.ErrInvalid)
		}
	default:
		return fmt.Errorf("role %q: want admin, ci or read: %w", t.Role, branches.ErrInvalid)
	}
	return nil
}

func validTokenName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

func (a *API) createToken(w http.ResponseWriter, r *http.Request) {
	var req NewToken
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		a.result(w, fmt.Errorf("invalid JSON: %v: %w", err, branches.ErrInvalid))
		return
	}
	if err := req.Validate(); err != nil {
		a.result(w, err)
		return
	}
	secret, err := NewSecret()
	if err != nil {
		a.result(w, err)
		return
	}
	t := catalog.Token{Name: req.Name, Role: req.Role, Prefix: req.Prefix, Hash: HashSecret(secret), CreatedAt: a.now()}
	if err := a.store.AddToken(r.Context(), t); err != nil {
		a.result(w, err)
		return
	}
	writeJSON(w, http.StatusOK, CreatedToken{TokenInfo: TokenInfo{Name: t.Name, Role: t.Role, Prefix: t.Prefix, CreatedAt: t.CreatedAt}, Token: secret})
}

func (a *API) listTokens(w http.ResponseWriter, r *http.Request) {
	tokens, err := a.store.Tokens(r.Context())
	if err != nil {
		a.result(w, err)
		return
	}
	out := []TokenInfo{}
	if a.bootstrap != nil {
		out = append(out, TokenInfo{Name: BootstrapName, Role: RoleAdmin, Flag: true})
	}
	for _, t := range tokens {
		out = append(out, TokenInfo{Name: t.Name, Role: t.Role, Prefix: t.Prefix, CreatedAt: t.CreatedAt})
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) removeToken(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == BootstrapName && a.bootstrap != nil {
		a.result(w, fmt.Errorf("token %q comes from --admin-token: restart serve without it (or with another): %w", name, branches.ErrInvalid))
		return
	}
	a.result(w, a.store.RemoveToken(r.Context(), name))
}

package catalog

import (
	"context"
	"fmt"
	"time"
)

// Token is an admin API token. Only the SHA-256 hash of its secret is kept; the
// secret itself is shown once, when the token is made.
type Token struct {
	Name      string
	Role      string // "admin", "ci" or "read"
	Prefix    string // for role ci: the branch names it may act on start with this
	Hash      []byte // SHA-256 of the secret
	CreatedAt time.Time
}

// AddToken records a new token. It fails with ErrExists if the name is taken.
func (c *Catalog) AddToken(ctx context.Context, t Token) (err error) {
	defer c.check(&err)
	_, err = c.exec(ctx,
		`INSERT INTO tokens (name, role, prefix, hash, created_at) VALUES (?, ?, ?, ?, ?)`,
		t.Name, t.Role, t.Prefix, t.Hash, unixNano(t.CreatedAt))
	if c.d.isUnique(err) {
		return fmt.Errorf("token %q: %w", t.Name, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("add token %q: %w", t.Name, err)
	}
	return nil
}

// Tokens lists every token, by name, hashes included.
func (c *Catalog) Tokens(ctx context.Context) (_ []Token, err error) {
	defer c.check(&err)
	rows, err := c.query(ctx, `SELECT name, role, prefix, hash, created_at FROM tokens ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		var t Token
		var created int64
		if err := rows.Scan(&t.Name, &t.Role, &t.Prefix, &t.Hash, &created); err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		t.CreatedAt = fromNano(created)
		out = append(out, t)
	}
	return out, rows.Err()
}

// RemoveToken deletes a token; it fails with ErrNotFound if there is none of that name.
func (c *Catalog) RemoveToken(ctx context.Context, name string) (err error) {
	defer c.check(&err)
	res, err := c.exec(ctx, `DELETE FROM tokens WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("remove token %q: %w", name, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("token %q: %w", name, ErrNotFound)
	}
	return nil
}

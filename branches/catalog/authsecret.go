package catalog

import (
	"context"
	"crypto/rand"
	"fmt"
)

// AuthSecret returns the catalog's secret for the stand-in login exchanges of
// roles that do not exist (or cannot log in), made at its first use. A stand-in
// salt is derived from it and the role's name, so every server on the catalog
// (a restart, each front) answers such a role with the same salt, as a real
// role's salt stays the same: comparing salts does not tell which roles exist.
func (c *Catalog) AuthSecret(ctx context.Context) (_ []byte, err error) {
	defer c.check(&err)
	fresh := make([]byte, 32)
	rand.Read(fresh)
	if _, err := c.exec(ctx, `INSERT INTO auth_secret (one, secret) VALUES (1, ?) ON CONFLICT (one) DO NOTHING`, fresh); err != nil {
		return nil, fmt.Errorf("make the login secret: %w", err)
	}
	var secret []byte
	if err := c.queryRow(ctx, `SELECT secret FROM auth_secret WHERE one = 1`).Scan(&secret); err != nil {
		return nil, fmt.Errorf("read the login secret: %w", err)
	}
	return secret, nil
}

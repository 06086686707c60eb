package branches

import "github.com/pgbranchproxy/pgbranchproxy/branches/catalog"

// Catalog returns the manager's catalog, which also keeps the admin API's tokens and
// audit log. Safe for concurrent use; closed by Close.
func (m *Manager) Catalog() *catalog.Catalog { return m.cat }

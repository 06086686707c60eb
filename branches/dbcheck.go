package branches

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// checkDatabase refuses a route to a branch that does not exist yet when its base
// (the parent named by pgbranch.from, else the source's newest seed) has no database
// of the route's name: a typo in the database name must not create a branch. The
// error is a *router.Error wrapping router.ErrUnknownDatabase (3D000 for clients),
// or router.ErrUnknownBranch when the parent named by pgbranch.from does not exist.
// An existing branch, or a base whose databases are not known, passes: its own
// server then reports a missing database. A running parent's databases are read
// again before a refusal (readParent). It never creates, wakes or changes a branch.
func (m *Manager) checkDatabase(ctx context.Context, source string, route router.Route) error {
	err := m.checkBaseDatabase(source, route)
	if errors.Is(err, router.ErrUnknownDatabase) && route.Options.From != "" {
		m.readParent(ctx, source, route)
		err = m.checkBaseDatabase(source, route)
	}
	return err
}

// checkBaseDatabase is checkDatabase on the base's databases as last read.
func (m *Manager) checkBaseDatabase(source string, route router.Route) error {
	m.mu.Lock()
	var dbs []string
	var seedID int64
	base := "source " + quote(source)
	switch {
	case m.branches[key{source, route.Branch}] != nil:
		m.mu.Unlock()
		return nil
	case route.Options.From != "":
		p := m.branches[key{source, route.Options.From}]
		if p == nil || p.ended() {
			m.mu.Unlock()
			return &router.Error{
				Err:     router.ErrUnknownBranch,
				Message: "parent branch " + quote(route.Options.From) + " does not exist",
				Hint: fmt.Sprintf("branch %s was not created: pgbranch.from names a branch of source %s to branch from (pgbranchproxy branch ls lists them)",
					quote(route.Branch), quote(source)),
			}
		}
		dbs, seedID, base = p.rec.Databases, p.rec.SeedID, "parent branch "+quote(route.Options.From)
	default:
		if s := m.sources[source]; s != nil && s.seed != nil {
			dbs = s.seed.Databases
		}
	}
	m.mu.Unlock()
	if dbs == nil && seedID != 0 {
		sd, err := m.seedByID(seedID)
		if err != nil {
			return nil // the base's databases are unknown: let its server decide
		}
		dbs = sd.Databases
	}
	if len(dbs) == 0 || slices.Contains(dbs, route.Database) {
		return nil
	}
	return &router.Error{
		Err:     router.ErrUnknownDatabase,
		Message: "database " + quote(route.Database) + " does not exist",
		Hint:    fmt.Sprintf("branch %s was not created: %s has %s", quote(route.Branch), base, listQuoted(dbs)),
	}
}

// readDatabases lists the databases of the server conn is connected to that accept
// connections, sorted.
func readDatabases(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_catalog.pg_database WHERE datallowconn ORDER BY datname`)
	if err != nil {
		return nil, fmt.Errorf("list databases: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// quote quotes client input for a message, as the router does: Go quoting, at most
// 64 bytes.
func quote(s string) string {
	if len(s) <= 64 {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:64]) + "..."
}

func listQuoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quote(n)
	}
	return strings.Join(q, ", ")
}

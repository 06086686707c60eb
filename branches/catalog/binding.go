package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// A catalog and a state directory belong together: the catalog's rows describe the
// directories under the state directory, and a server reconciles one against the
// other, removing what the other lacks. The pair shares a random id, the state id,
// kept in the catalog's binding table and in a file of the state directory
// (package branches), so that a server started on a catalog that is not its state
// directory's can tell before it removes anything.

// StateID returns the id of the state directory the catalog is bound to, or ""
// if it is bound to none yet.
func (c *Catalog) StateID(ctx context.Context) (_ string, err error) {
	defer c.check(&err)
	var id string
	err = c.queryRow(ctx, `SELECT state_id FROM binding WHERE one = 1`).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the catalog's state id: %w", err)
	}
	return id, nil
}

// Bind binds the catalog to the state directory id, unless it is bound already,
// and returns the id it is bound to: id, or the one bound before.
func (c *Catalog) Bind(ctx context.Context, id string) (_ string, err error) {
	defer c.check(&err)
	if id == "" {
		return "", errors.New("bind the catalog: empty state id")
	}
	if _, err := c.exec(ctx, `INSERT INTO binding (one, state_id, bound_at) VALUES (1, ?, ?) ON CONFLICT (one) DO NOTHING`,
		id, time.Now().UnixNano()); err != nil {
		return "", fmt.Errorf("bind the catalog: %w", err)
	}
	return c.StateID(ctx)
}

// HasRecords reports whether the catalog records any source, seed or branch.
func (c *Catalog) HasRecords(ctx context.Context) (_ bool, err error) {
	defer c.check(&err)
	var n int64
	err = c.queryRow(ctx, `SELECT (SELECT COUNT(*) FROM sources) + (SELECT COUNT(*) FROM seeds) + (SELECT COUNT(*) FROM branches)`).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("count the catalog's records: %w", err)
	}
	return n > 0, nil
}

// RetiredPrefix starts the state id of a catalog whose rows catalog migrate copied
// to another: the state directory belongs to the copy from then on.
const RetiredPrefix = "migrated:"

// SetStateID binds the catalog to the state directory id, replacing any binding:
// for a catalog catalog migrate has just filled.
func (c *Catalog) SetStateID(ctx context.Context, id string) (err error) {
	defer c.check(&err)
	if id == "" {
		return errors.New("bind the catalog: empty state id")
	}
	_, err = c.exec(ctx, `INSERT INTO binding (one, state_id, bound_at) VALUES (1, ?, ?)
		ON CONFLICT (one) DO UPDATE SET state_id = excluded.state_id, bound_at = excluded.bound_at`, id, time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("bind the catalog: %w", err)
	}
	return nil
}

// ClusterBinding is the binding of a catalog that nodes share (serve --role
// node): it belongs to no single state directory, and a server that would own it
// alone refuses it.
const ClusterBinding = "cluster"

// Retire marks the catalog as migrated away from its state directory id, so that a
// server started on it again (an old unit file, a forgotten --catalog) is refused
// instead of reconciling the state directory against rows that are out of date.
func (c *Catalog) Retire(ctx context.Context, id string) error {
	return c.SetStateID(ctx, RetiredPrefix+id)
}

package catalog

import (
	"context"
	"fmt"
	"time"
)

// pruneBatch is how many rows one DELETE of a pruning removes: the catalog has one
// writer on SQLite, and a claim or a create must not wait behind a long delete.
const pruneBatch = 1000

// PruneTransitions deletes the transitions logged before before and returns how
// many went.
func (c *Catalog) PruneTransitions(ctx context.Context, before time.Time) (int64, error) {
	return c.prune(ctx, "transitions", before)
}

// PruneAudit deletes the audit entries made before before and returns how many went.
func (c *Catalog) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	return c.prune(ctx, "audit", before)
}

// prune deletes table's rows whose at is before before, pruneBatch at a time,
// oldest first. table is one of the two logs, never user input.
func (c *Catalog) prune(ctx context.Context, table string, before time.Time) (n int64, err error) {
	defer c.check(&err)
	q := `DELETE FROM ` + table + ` WHERE id IN (SELECT id FROM ` + table + ` WHERE at < ? ORDER BY id LIMIT ?)`
	for {
		res, err := c.exec(ctx, q, unixNano(before), pruneBatch)
		if err != nil {
			return n, fmt.Errorf("prune %s: %w", table, err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return n, fmt.Errorf("prune %s: %w", table, err)
		}
		n += k
		if k < pruneBatch {
			return n, nil
		}
	}
}

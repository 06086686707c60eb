package catalog

import (
	"context"
	"errors"
)

// A seed is built once, on one node (the seed row's node_id), and copied to the
// other nodes that serve branches of it. node_seeds records which node holds a
// complete copy of which seed: a row is written once the copy is on the node's
// disk, and removed before the copy is. The front places a new branch on a node
// that holds its source's newest seed (SeedHolders).

// schemaSeedCopies holds the copies of seeds on nodes other than their builder.
const schemaSeedCopies = `
CREATE TABLE IF NOT EXISTS node_seeds (
	node_id TEXT NOT NULL,
	seed_id <int> NOT NULL,
	at      <int> NOT NULL,
	PRIMARY KEY (node_id, seed_id)
);
`

// errNotRegistered: a write that records this node's own state was asked of a
// process that has not registered as a node.
var errNotRegistered = errors.New("this process is not registered as a node")

// ownRowFence returns this node's id and the fence of a write to its own rows
// of node_seeds (nodeFence); errNotRegistered for a process that is no node.
func (c *Catalog) ownRowFence() (me any, cond string, args []any, err error) {
	if me, _ = c.owner(); me == nil {
		return nil, "", nil, errNotRegistered
	}
	cond, args, err = c.nodeFence(false)
	return me, cond, args, err
}

// AddSeedCopy records that this node holds a complete copy of the seed. It is
// fenced by the node row; recording a copy twice is not an error.
func (c *Catalog) AddSeedCopy(ctx context.Context, seedID int64) (err error) {
	defer c.check(&err)
	me, cond, args, err := c.ownRowFence()
	if err != nil {
		return err
	}
	res, err := c.exec(ctx, `INSERT INTO node_seeds (node_id, seed_id, at) SELECT ?, ?, `+c.d.nowNanos()+`
		WHERE EXISTS (SELECT 1 FROM seeds WHERE id = ?)`+cond+` ON CONFLICT (node_id, seed_id) DO NOTHING`,
		append([]any{me, seedID, seedID}, args...)...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	// Nothing inserted: the row was there already, the seed is gone, or the fence.
	if err := c.fencedNone(ctx, res, false); err != nil {
		return err
	}
	var seeds int
	if err := c.queryRow(ctx, `SELECT count(*) FROM seeds WHERE id = ?`, seedID).Scan(&seeds); err != nil {
		return err
	}
	if seeds == 0 {
		return ErrNotFound
	}
	return nil
}

// DeleteSeedCopy forgets this node's copy of the seed (before it is removed
// from the disk); forgetting one it does not record is not an error. It is
// fenced by the node row.
func (c *Catalog) DeleteSeedCopy(ctx context.Context, seedID int64) (err error) {
	defer c.check(&err)
	me, cond, args, err := c.ownRowFence()
	if err != nil {
		return err
	}
	res, err := c.exec(ctx, `DELETE FROM node_seeds WHERE node_id = ? AND seed_id = ?`+cond, append([]any{me, seedID}, args...)...)
	if err != nil {
		return err
	}
	return c.fencedNone(ctx, res, false)
}

// SeedCopies lists the seeds this node holds copies of.
func (c *Catalog) SeedCopies(ctx context.Context) (_ []int64, err error) {
	defer c.check(&err)
	me, _ := c.owner()
	if me == nil {
		return nil, nil
	}
	return scanColumn[int64](c.query(ctx, `SELECT seed_id FROM node_seeds WHERE node_id = ? ORDER BY seed_id`, me))
}

// SeedHolders lists the nodes that hold the seed: its builder and the nodes
// with a copy.
func (c *Catalog) SeedHolders(ctx context.Context, seedID int64) (_ []string, err error) {
	defer c.check(&err)
	return scanColumn[string](c.query(ctx, `SELECT node_id FROM seeds WHERE id = ? AND node_id IS NOT NULL
		UNION SELECT node_id FROM node_seeds WHERE seed_id = ? ORDER BY 1`, seedID, seedID))
}

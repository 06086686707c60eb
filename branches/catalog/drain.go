package catalog

import (
	"context"
	"errors"
	"fmt"
)

// A node is drained before maintenance: fronts place no new branch on it, and it
// records none itself (the fence of a new row asks for an active node, fence.go),
// while its branches go on serving their sessions and waking. It stays draining
// across its restarts until it is resumed; the janitor may still declare it
// dead.

// ErrDraining is returned (wrapped, with ErrFenced) by a new branch row on a
// draining node.
var ErrDraining = errors.New("the node is draining")

// ErrNodeDead is returned by SetDraining for a node the janitor declared dead.
var ErrNodeDead = errors.New("the node is dead")

// SetDraining makes the node id draining, or active again; asking for the state
// it is in is not an error. Any process on the catalog may do it (an operator's
// command reaches one node's admin API): it is not fenced.
func (c *Catalog) SetDraining(ctx context.Context, id string, draining bool) (err error) {
	defer c.check(&err)
	from, to := NodeActive, NodeDraining
	if !draining {
		from, to = to, from
	}
	if _, err := c.exec(ctx, `UPDATE nodes SET state = ? WHERE id = ? AND state = ?`, to, id, from); err != nil {
		return err
	}
	var state NodeState
	err = c.queryRow(ctx, `SELECT state FROM nodes WHERE id = ?`, id).Scan(&state)
	switch {
	case err != nil:
		return noRows(err, "node "+id)
	case state == NodeDead:
		return fmt.Errorf("node %s: %w", id, ErrNodeDead)
	case state != to:
		return fmt.Errorf("node %s is %s", id, state)
	}
	if me := c.node.Load(); me != nil && me.id == id {
		me.draining.Store(draining)
	}
	return nil
}

package catalog

import (
	"context"
	"fmt"

	"github.com/pgbranchproxy/pgbranchproxy/branches/errs"
)

// A node is drained before maintenance: fronts place no new branch on it, and it
// records none itself (the fence of a new row asks for an active node that is not
// drained, fence.go), while its branches go on serving their sessions and waking.
// The drain is a column of its own (nodes.drained), which neither a registration
// nor the janitor touches: a drained node stays drained across its restarts, and
// across being declared dead and coming back, until it is resumed. Node.State
// reads `draining` for an active node that is drained.

// ErrDraining is returned (wrapped) by a new branch row on a drained node.
var ErrDraining = errs.ErrDraining

// SetDraining drains the node id, or resumes it; asking for what it is already
// is not an error, and a dead node may be drained (it stays so when it comes
// back). Any process on the catalog may do it (an operator's command reaches one
// node's admin API): it is not fenced.
func (c *Catalog) SetDraining(ctx context.Context, id string, draining bool) (err error) {
	defer c.check(&err)
	res, err := c.exec(ctx, `UPDATE nodes SET drained = ? WHERE id = ?`, draining, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("node %s: %w", id, ErrNotFound)
	}
	if me := c.node.Load(); me != nil && me.id == id {
		me.draining.Store(draining)
	}
	return nil
}

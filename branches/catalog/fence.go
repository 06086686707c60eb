package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// The fence. Once this process has registered as a node (nodes.go), every write
// it makes on behalf of its own work carries, in its own WHERE clause, the
// condition that its registration is still the node's: the node row has its id
// and its epoch and is not dead (nodeFence). A write to a branch row also
// requires the row to carry that id and epoch and not to be lost (fence). On
// Postgres the node row is read FOR SHARE inside the statement, so a
// registration elsewhere or the janitor's bury (both update that row) waits for
// the write's transaction, and the write for them; on SQLite the transaction is
// the only writer. The check costs no statement of its own: only a write that
// matched no row asks why (fenced), to tell ErrNodeLost (the registration is
// gone) from ErrLost (the branch was declared lost), ErrFenced (the branch is
// another registration's) and ErrNotFound.

// rowQuerier is a Catalog or a transaction.
type rowQuerier interface {
	queryRow(ctx context.Context, query string, args ...any) *sql.Row
}

// Lost returns a channel that is closed once a heartbeat or a fenced write finds
// this process's registration gone (the node was registered again elsewhere, or
// declared dead). From then on every fenced write fails with ErrNodeLost without
// being sent. Nil (never ready) when the process has not registered; Register
// starts a registration with a channel of its own.
func (c *Catalog) Lost() <-chan struct{} {
	if me := c.node.Load(); me != nil {
		return me.lost
	}
	return nil
}

// NodeLost reports whether this process's registration was found gone (Lost).
func (c *Catalog) NodeLost() bool {
	me := c.node.Load()
	return me != nil && me.gone()
}

// markLost records that the registration r was found gone.
func (c *Catalog) markLost(r *nodeReg) {
	r.once.Do(func() { close(r.lost) })
}

// DeclaredDead reports, once the registration was found gone, whether it went
// because the janitor declared the node dead (its row still carries this
// registration's epoch), rather than because another process registered as
// the node since (a higher epoch).
func (c *Catalog) DeclaredDead(ctx context.Context) (bool, error) {
	me := c.node.Load()
	if me == nil || !me.gone() {
		return false, nil
	}
	var epoch int64
	var state NodeState
	err := c.queryRow(ctx, `SELECT epoch, state FROM nodes WHERE id = ?`, me.id).Scan(&epoch, &state)
	if err != nil {
		return false, noRows(err, "node "+me.id)
	}
	return epoch == me.epoch.Load() && state == NodeDead, nil
}

// nodeLostErr is the refusal of a write by the lost registration r.
func nodeLostErr(r *nodeReg) error {
	return fmt.Errorf("%w (node %s, epoch %d)", errNodeLost, r.id, r.epoch.Load())
}

// nodeFence returns the condition, to be ANDed into a write's WHERE clause, that
// this process's registration is the node's: the node row carries its id and
// epoch and is not dead, and (forNew: a write that gives the node a branch) is
// active. Nothing when the process has not registered; ErrNodeLost, without
// asking, once the registration was found gone.
func (c *Catalog) nodeFence(forNew bool) (cond string, args []any, err error) {
	return c.nodeFenceOf(c.node.Load(), forNew)
}

func (c *Catalog) nodeFenceOf(me *nodeReg, forNew bool) (cond string, args []any, err error) {
	if me == nil {
		return "", nil, nil
	}
	if me.gone() {
		return "", nil, nodeLostErr(me)
	}
	state, args := `state <> '`+string(NodeDead)+`'`, []any{me.id, me.epoch.Load()}
	if forNew {
		state, args = `state = '`+string(NodeActive)+`' AND drained = ?`, append(args, false)
	}
	return ` AND EXISTS (SELECT 1 FROM nodes WHERE id = ? AND epoch = ? AND ` + state + c.d.forShare() + `)`,
		args, nil
}

// ownedCond limits a write to the branch rows a registration owns: its id, its
// epoch, not lost. Two arguments: the id and the epoch.
const ownedCond = ` AND node_id = ? AND node_epoch = ? AND state <> '` + string(Lost) + `'`

// fence returns the condition that limits a write to the branch rows this node
// owns under its epoch, while its registration is the node's (nodeFence), with
// its arguments: nothing when the process has not registered.
func (c *Catalog) fence(forNew bool) (cond string, args []any, err error) {
	me := c.node.Load()
	node, nargs, err := c.nodeFenceOf(me, forNew)
	if node == "" || err != nil {
		return "", nil, err
	}
	return ownedCond + node, append([]any{me.id, me.epoch.Load()}, nargs...), nil
}

// fenced explains a fenced write that matched no row. It reads the node row
// first: a registration that is gone is ErrNodeLost (with ErrLost when the
// branch id, if any, was declared lost with it), and a node that is not active
// takes no new branch (forNew; ErrFenced). Then, for a branch id, the branch
// row: ErrLost, ErrFenced naming who has it now, or ErrNotFound if it is gone or
// still this node's (a write that also required something else of the row). With
// no branch id and nothing wrong with the node, nil: the caller says what else
// the write required.
func (c *Catalog) fenced(ctx context.Context, q rowQuerier, forNew bool, id int64, name string) error {
	if err := c.nodeRefusal(ctx, q, forNew); err != nil {
		if id == 0 {
			return err
		}
		return c.lostToo(ctx, q, id, name, err)
	}
	if id == 0 {
		return nil
	}
	var state string
	var node sql.NullString
	var epoch sql.NullInt64
	err := q.queryRow(ctx, `SELECT state, node_id, node_epoch FROM branches WHERE id = ?`, id).Scan(&state, &node, &epoch)
	if err != nil {
		return noRows(err, fmt.Sprintf("branch %q", name))
	}
	if State(state) == Lost {
		return fmt.Errorf("branch %q: %w: %w", name, ErrLost, ErrFenced)
	}
	if me := c.node.Load(); me != nil && node.String == me.id && epoch.Int64 == me.epoch.Load() {
		return fmt.Errorf("%s: %w", name, ErrNotFound)
	}
	return fmt.Errorf("branch %q belongs to node %s at epoch %d: %w", name, node.String, epoch.Int64, ErrFenced)
}

// nodeRefusal reads the node row: ErrNodeLost (and the registration marked lost)
// when another registration has it (a higher epoch than any this process wrote)
// or it is dead at this registration's epoch, ErrRolledBack (with
// ErrUnavailable) when the catalog no longer has this registration although no
// other took its place (rolledBack), ErrFenced when forNew and the node is not
// active, nil otherwise or when the process has not registered. An epoch only
// goes up and only a registration revives a dead node, so a registration found
// gone by the write is found gone here too.
func (c *Catalog) nodeRefusal(ctx context.Context, q rowQuerier, forNew bool) error {
	me := c.node.Load()
	if me == nil {
		return nil
	}
	var state NodeState
	var drained bool
	var epoch int64
	err := q.queryRow(ctx, `SELECT epoch, state, drained FROM nodes WHERE id = ?`, me.id).Scan(&epoch, &state, &drained)
	switch {
	case rolledBack(me, epoch, err):
		return fmt.Errorf("%w: %w", ErrUnavailable, rolledBackErr(me, epoch, err))
	case err != nil:
		return fmt.Errorf("read node %s: %w", me.id, err)
	case epoch != me.epoch.Load() || state == NodeDead:
		c.markLost(me)
		return nodeLostErr(me)
	case forNew && drained:
		me.draining.Store(true)
		return fmt.Errorf("node %s takes no new branch: %w", me.id, ErrDraining)
	}
	return nil
}

// lostToo adds ErrLost to err, the refusal of a write to branch id because this
// node's registration is gone, when the row was declared lost with it (the
// janitor buried the node): the branch's owner must learn that it is lost, not
// only that this node is.
func (c *Catalog) lostToo(ctx context.Context, q rowQuerier, id int64, name string, err error) error {
	if !errors.Is(err, ErrNodeLost) {
		return err
	}
	var state string
	if q.queryRow(ctx, `SELECT state FROM branches WHERE id = ?`, id).Scan(&state) == nil && State(state) == Lost {
		return fmt.Errorf("branch %q: %w (%w)", name, ErrLost, err)
	}
	return err
}

// fencedNone explains a single-statement fenced write (nodeFence) that changed
// no row: ErrNodeLost or ErrFenced from the node row, or nil when the node is
// fine (the write's other conditions matched nothing).
func (c *Catalog) fencedNone(ctx context.Context, res sql.Result, forNew bool) error {
	if n, err := res.RowsAffected(); err != nil || n > 0 || c.node.Load() == nil {
		return err
	}
	return c.fenced(ctx, c, forNew, 0, "")
}

// owner returns the node id and epoch a new row gets: NULLs when not registered.
func (c *Catalog) owner() (id, epoch any) {
	if me := c.node.Load(); me != nil {
		return me.id, me.epoch.Load()
	}
	return nil, nil
}

package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// A failover of a Postgres catalog to an asynchronous standby loses the
// transactions the standby had not received, the node's own registration among
// them: a node that registered (or registered again) just before finds its row
// at an older epoch, or no row at all. No other process can have taken its
// place meanwhile (it holds its node's lock, OwnNode, and a second process
// would have written an epoch above any this one wrote), so the node is not
// lost: it registers again above every epoch either server has seen, adopts its
// rows, and goes on serving. Until it has, its fenced writes fail with
// ErrRolledBack and ErrUnavailable, and its heartbeat with ErrRolledBack.

// rolledBack reports whether the node row read as epoch (err: the read's error)
// means that the catalog lost this registration rather than that another took
// its place: no row, a row at an older epoch, or one at an epoch above this
// registration's that this process itself wrote (a Reregister whose COMMIT's
// reply was lost).
func rolledBack(me *nodeReg, epoch int64, err error) bool {
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return true
	case err != nil:
		return false
	}
	return epoch < me.epoch.Load() || epoch > me.epoch.Load() && epoch <= me.highest.Load()
}

// rolledBackErr describes a rolled-back registration found as epoch (err: the
// read's error, sql.ErrNoRows when the node has no row).
func rolledBackErr(me *nodeReg, epoch int64, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w (node %s: no row; this process registered it at epoch %d)", ErrRolledBack, me.id, me.epoch.Load())
	}
	return fmt.Errorf("%w (node %s: epoch %d in the catalog; this process registered it at epoch %d)", ErrRolledBack, me.id, epoch, me.epoch.Load())
}

// Reregister registers this process's node again after its registration was
// found rolled back (ErrRolledBack), at an epoch above the row's and above any
// this process wrote, with a lease of ttl and the address addr, keeping its
// slot if no other node has taken it; the node adopts its rows under the new
// epoch, as Register does. It returns the node as registered and the epoch it
// held before. A registration that was not rolled back is left alone:
// Reregister fails with ErrNodeLost if another took its place, and returns the
// node unchanged if the row is this registration's.
func (c *Catalog) Reregister(ctx context.Context, addr string, ttl time.Duration) (_ Node, before int64, err error) {
	defer c.check(&err)
	me := c.node.Load()
	if me == nil {
		return Node{}, 0, errors.New("register again: this node is not registered")
	}
	if me.gone() {
		return Node{}, 0, nodeLostErr(me)
	}
	before = me.epoch.Load()
	n := Node{ID: me.id, Addr: addr}
	err = c.tx(ctx, func(tx sqlTx) error {
		if err := c.d.lockNodes(ctx, tx.tx); err != nil {
			return err
		}
		var state NodeState
		err := tx.queryRow(ctx, `SELECT slot, epoch, state, drained FROM nodes WHERE id = ?`+c.d.forUpdate(), me.id).
			Scan(&n.Slot, &n.Epoch, &state, &n.Drained)
		if !rolledBack(me, n.Epoch, err) {
			switch {
			case err != nil:
				return fmt.Errorf("register node %s again: %w", me.id, err)
			case n.Epoch == before && state != NodeDead:
				n.State = nodeState(state, n.Drained)
				return nil // its own: nothing was lost
			}
			c.markLost(me)
			return nodeLostErr(me)
		}
		return c.reregister(ctx, tx, me, &n, err == nil, ttl)
	})
	if err != nil {
		return Node{}, before, err
	}
	return n, before, nil
}

// reregister writes the node row of a rolled-back registration at the next
// epoch (exists: whether the node has a row, read into n) and adopts its rows.
func (c *Catalog) reregister(ctx context.Context, tx sqlTx, me *nodeReg, n *Node, exists bool, ttl time.Duration) error {
	epoch := max(n.Epoch, me.highest.Load()) + 1
	me.highest.Store(epoch) // before the COMMIT, whose reply may be lost
	var err error
	if exists {
		_, err = tx.exec(ctx, `UPDATE nodes SET addr = ?, epoch = ?, lease_until = `+c.d.nowNanos()+` + ?, state = ? WHERE id = ?`,
			n.Addr, epoch, int64(ttl), NodeActive, me.id)
	} else {
		if n.Slot, err = c.slotAgain(ctx, tx, me.slot); err != nil {
			return err
		}
		n.Drained = false
		_, err = tx.exec(ctx, `INSERT INTO nodes (id, slot, addr, epoch, lease_until, state, load)
			VALUES (?, ?, ?, ?, `+c.d.nowNanos()+` + ?, ?, '{}')`, me.id, n.Slot, n.Addr, epoch, int64(ttl), NodeActive)
	}
	if err != nil {
		return fmt.Errorf("register node %s again: %w", me.id, err)
	}
	_, err = tx.exec(ctx, `UPDATE branches SET node_id = ?, node_epoch = ? WHERE (node_id = ? OR node_id IS NULL) AND state <> ?`,
		me.id, epoch, me.id, Lost)
	if err != nil {
		return fmt.Errorf("adopt the branches of node %s: %w", me.id, err)
	}
	n.Epoch, n.State = epoch, nodeState(NodeActive, n.Drained)
	me.epoch.Store(epoch)
	return nil
}

// slotAgain returns slot if no node has it, else the lowest free one.
func (c *Catalog) slotAgain(ctx context.Context, tx sqlTx, slot int) (int, error) {
	var taken int
	if err := tx.queryRow(ctx, `SELECT count(*) FROM nodes WHERE slot = ?`, slot).Scan(&taken); err != nil {
		return 0, fmt.Errorf("read node slots: %w", err)
	}
	if taken == 0 && slot > 0 {
		return slot, nil
	}
	return freeSlot(ctx, tx)
}

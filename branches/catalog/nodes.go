package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// A node is a server that runs branches on a catalog, known by the id of its state
// directory. Every (re)registration gives it a new epoch; the node owns the branch
// rows that carry its id and that epoch, and every change it writes to one is
// conditional on both and on the node row (the fence, fence.go): a node that was
// registered again elsewhere, or declared dead by the janitor, finds that its
// writes match nothing (ErrNodeLost, ErrFenced) instead of overwriting what the
// new owner wrote. Leases are measured by the catalog's clock only
// (dialect.nowNanos).

// NodeState is a node's state in the catalog.
type NodeState string

// Node states.
const (
	NodeActive   NodeState = "active"
	NodeDraining NodeState = "draining" // active and drained: no new branches (drain.go); never stored
	NodeDead     NodeState = "dead"     // declared by the janitor; its branches are Lost
)

// MaxSlot is the highest node slot: slots go into cancel keys, 12 bits.
const MaxSlot = 4095

// Load is what a node reports with each heartbeat.
type Load struct {
	Running    int   `json:"running"`
	MaxRunning int   `json:"max_running"` // 0: no limit
	FreeBytes  int64 `json:"free_bytes"`  // free on the state directory's filesystem
}

// Node is one row of the nodes table.
type Node struct {
	ID   string
	Slot int
	Addr string
	// PeerAddr is where other nodes fetch this node's seeds; "" for none.
	PeerAddr   string
	Epoch      int64
	LeaseUntil time.Time // in the catalog's clock
	State      NodeState // NodeDraining for an active node that is drained
	Drained    bool      // drained by an operator (drain.go), whatever its state
	Load       Load
	// LeaseAge is how long ago, by the catalog's clock when it was read, the lease
	// ran out; negative while it runs.
	LeaseAge time.Duration
}

// nodeReg is this process's registration.
type nodeReg struct {
	id   string
	slot int // the slot it registered with (reregister.go keeps it)
	// epoch is the registration's epoch: Register's, then each Reregister's.
	epoch atomic.Int64
	// highest is the highest epoch this process has written to the node row,
	// committed or not (a COMMIT whose reply was lost): a row at an epoch above
	// epoch but not above highest is this process's own (reregister.go).
	highest atomic.Int64
	lost    chan struct{} // closed once the registration is found gone (markLost)
	once    sync.Once
	// draining is the node's state as last read (drain.go).
	draining atomic.Bool
}

// gone reports whether the registration was found gone.
func (r *nodeReg) gone() bool {
	select {
	case <-r.lost:
		return true
	default:
		return false
	}
}

// Register registers this process as the node id (the state directory's id),
// listening on addr, with a lease of ttl: a new node gets the lowest free slot, a
// known one keeps its slot; either way its epoch goes up by one and it is active
// (and stays drained if it was, drain.go).
// The node then adopts its branch rows (its own and those of no node) under the
// new epoch, except those declared lost. From then on the catalog's writes of the
// node's work (branches, sources, seeds, server settings) are fenced by the
// registration. Safe to call again (a re-registration).
func (c *Catalog) Register(ctx context.Context, id, addr string, ttl time.Duration) (_ Node, err error) {
	defer c.check(&err)
	if id == "" {
		return Node{}, errors.New("register node: empty id")
	}
	var n Node
	err = c.tx(ctx, func(tx sqlTx) error {
		if err := c.d.lockNodes(ctx, tx.tx); err != nil {
			return err
		}
		err := tx.queryRow(ctx, `SELECT slot, epoch, drained FROM nodes WHERE id = ?`+c.d.forUpdate(), id).Scan(&n.Slot, &n.Epoch, &n.Drained)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if n.Slot, err = freeSlot(ctx, tx); err != nil {
				return err
			}
			n.Epoch = 1
			_, err = tx.exec(ctx, `INSERT INTO nodes (id, slot, addr, epoch, lease_until, state, load)
				VALUES (?, ?, ?, ?, `+c.d.nowNanos()+` + ?, ?, '{}')`, id, n.Slot, addr, n.Epoch, int64(ttl), NodeActive)
		case err == nil:
			n.Epoch++
			_, err = tx.exec(ctx, `UPDATE nodes SET addr = ?, epoch = ?, lease_until = `+c.d.nowNanos()+` + ?, state = ? WHERE id = ?`,
				addr, n.Epoch, int64(ttl), NodeActive, id)
		}
		if err != nil {
			return fmt.Errorf("register node %s: %w", id, err)
		}
		_, err = tx.exec(ctx, `UPDATE branches SET node_id = ?, node_epoch = ? WHERE (node_id = ? OR node_id IS NULL) AND state <> ?`,
			id, n.Epoch, id, Lost)
		if err != nil {
			return fmt.Errorf("adopt the branches of node %s: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return Node{}, err
	}
	n.ID, n.Addr, n.State = id, addr, nodeState(NodeActive, n.Drained)
	reg := &nodeReg{id: id, slot: n.Slot, lost: make(chan struct{})}
	reg.epoch.Store(n.Epoch)
	reg.highest.Store(n.Epoch)
	reg.draining.Store(n.Drained)
	c.node.Store(reg)
	return n, nil
}

// ClearOwners makes every branch row that is not lost belong to no node, so that
// the next node to register adopts it: for a catalog being bound to a state
// directory (package branches), whose rows are that directory's whichever
// registration wrote them.
func (c *Catalog) ClearOwners(ctx context.Context) (err error) {
	defer c.check(&err)
	if _, err := c.exec(ctx, `UPDATE branches SET node_id = NULL, node_epoch = NULL WHERE state <> ?`, Lost); err != nil {
		return fmt.Errorf("clear the branches' nodes: %w", err)
	}
	return nil
}

// freeSlot returns the lowest slot no node has.
func freeSlot(ctx context.Context, tx sqlTx) (int, error) {
	rows, err := tx.tx.QueryContext(ctx, `SELECT slot FROM nodes ORDER BY slot`)
	if err != nil {
		return 0, fmt.Errorf("read node slots: %w", err)
	}
	defer rows.Close()
	want := 1
	for rows.Next() {
		var s int
		if err := rows.Scan(&s); err != nil {
			return 0, err
		}
		if s > want {
			break
		}
		want = s + 1
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if want > MaxSlot {
		return 0, fmt.Errorf("register node: all %d node slots are taken", MaxSlot)
	}
	return want, nil
}

// Heartbeat renews this node's lease for ttl and records its load and its
// addresses: addr for sessions, peer for other nodes ("" for none).
// It is fenced by the registration: if the node was registered again (by another
// process with the same id) or declared dead, nothing changes, it returns
// ErrNodeLost (which is also ErrFenced), Lost's channel is closed, and every
// write this catalog fences fails so until the node registers again.
func (c *Catalog) Heartbeat(ctx context.Context, addr, peer string, ttl time.Duration, load Load) (err error) {
	defer c.check(&err)
	me := c.node.Load()
	if me == nil {
		return errors.New("heartbeat: this node is not registered")
	}
	js, err := json.Marshal(load)
	if err != nil {
		return err
	}
	if err := c.owned(ctx); err != nil {
		return err
	}
	var drained bool
	err = c.queryRow(ctx, `UPDATE nodes SET lease_until = `+c.d.nowNanos()+` + ?, load = ?, addr = ?, peer_addr = ?
		WHERE id = ? AND epoch = ? AND state <> ? RETURNING drained`, int64(ttl), string(js), addr, peer, me.id, me.epoch.Load(), NodeDead).Scan(&drained)
	if errors.Is(err, sql.ErrNoRows) {
		// Gone (nodeRefusal marks it lost), or rolled back by a failover
		// (ErrRolledBack: the caller registers again, Reregister).
		if err := c.nodeRefusal(ctx, c, false); err != nil {
			return err
		}
		return fmt.Errorf("heartbeat: node %s: its row changed under the heartbeat; trying again", me.id)
	}
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	me.draining.Store(drained)
	return nil
}

// Draining reports whether this node was draining at its registration or last
// heartbeat, or since it drained itself.
func (c *Catalog) Draining() bool {
	me := c.node.Load()
	return me != nil && me.draining.Load()
}

// Nodes lists the nodes by slot, with each lease's age by the catalog's clock.
func (c *Catalog) Nodes(ctx context.Context) (_ []Node, err error) {
	defer c.check(&err)
	rows, err := c.query(ctx, `SELECT id, slot, addr, peer_addr, epoch, lease_until, state, drained, load, `+c.d.nowNanos()+` FROM nodes ORDER BY slot`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Node
	for rows.Next() {
		var n Node
		var lease, now int64
		var load string
		if err := rows.Scan(&n.ID, &n.Slot, &n.Addr, &n.PeerAddr, &n.Epoch, &lease, &n.State, &n.Drained, &load, &now); err != nil {
			return nil, err
		}
		n.LeaseUntil, n.LeaseAge = fromNano(lease), time.Duration(now-lease)
		n.State = nodeState(n.State, n.Drained)
		if err := json.Unmarshal([]byte(load), &n.Load); err != nil {
			return nil, fmt.Errorf("node %s: load %q: %w", n.ID, load, err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// Registration returns this process's node id and epoch, and false if it has not
// registered (a tool, or a test, whose writes are not fenced).
func (c *Catalog) Registration() (id string, epoch int64, ok bool) {
	if me := c.node.Load(); me != nil {
		return me.id, me.epoch.Load(), true
	}
	return "", 0, false
}

// nodeState is the state a node is shown in: NodeDraining for an active node
// that is drained.
func nodeState(stored NodeState, drained bool) NodeState {
	if stored == NodeActive && drained {
		return NodeDraining
	}
	return stored
}

package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// State is a branch's lifecycle state.
type State string

// Branch states. The -ing states are written before a side effect starts; reconcile
// finishes or rolls back any branch found in one of them at start-up.
const (
	Creating   State = "creating"
	Starting   State = "starting"
	Running    State = "running"
	Stopping   State = "stopping"
	Stopped    State = "stopped"
	Resetting  State = "resetting"
	Destroying State = "destroying"
	Failed     State = "failed"
	// Lost: the branch's node was declared dead by the janitor (nodes.go); its
	// data is on that node, if anywhere. Only deleting the row changes it.
	Lost State = "lost"
)

// Branch is one copy-on-write branch of a seed.
type Branch struct {
	ID     int64
	Source string
	Name   string
	SeedID int64
	Parent string // parent branch name, "" when branched from the seed
	// ParentID is the parent's id as of the fork (a branch of the parent's name
	// made after it was destroyed is another); 0 for a branch of the seed, and for
	// rows recorded before it was.
	ParentID   int64
	Layers     []string // read-only overlay layers, top first; the last is the seed
	State      State
	CowMode    string // "lazyrw" or "eager", as observed at the last start
	PID        int    // postmaster PID while running
	TTL        time.Duration
	Ephemeral  bool
	Quota      int64    // bytes the branch may own; 0: the server's default
	Roles      string   // the branch's login roles as last read, encoded by package roles; "" if never read
	Databases  []string // the branch's databases as last read with its roles; nil if never read
	OwnedBytes int64
	CreateMS   int64 // how long creation took, in milliseconds
	Error      string
	CreatedAt  time.Time
	LastUsedAt time.Time
	StateAt    time.Time
	// Pooled marks a member of its source's warm pool: created and started ahead of
	// demand under a placeholder name, until a client's new branch claims it.
	Pooled bool
	// NodeID and NodeEpoch are the node that owns the branch and its epoch when it
	// took it ("" and 0 before any node registered). Read only: inserts and claims
	// set them from the registration (nodes.go).
	NodeID    string
	NodeEpoch int64
	// HadSession: a client session has used the branch (a claim, or an ephemeral
	// branch's first lease: MarkHadSession). Read only for UpdateBranch. An ephemeral
	// branch goes when its last session ends; after a crash, this is how the next
	// run knows that its sessions have ended rather than not begun.
	HadSession bool
}

const branchCols = `id, source, name, seed_id, parent, layers, state, cow_mode, pid, ttl_ns, ephemeral, quota, roles,
	owned_bytes, create_ms, error, created_at, last_used_at, state_at, databases, pooled,
	COALESCE(node_id, ''), COALESCE(node_epoch, 0), had_session, parent_id`

func scanBranch(sc interface{ Scan(...any) error }) (Branch, error) {
	var b Branch
	var layers, dbs string
	var ttl, created, used, stateAt int64
	err := sc.Scan(&b.ID, &b.Source, &b.Name, &b.SeedID, &b.Parent, &layers, &b.State, &b.CowMode, &b.PID,
		&ttl, &b.Ephemeral, &b.Quota, &b.Roles, &b.OwnedBytes, &b.CreateMS, &b.Error, &created, &used, &stateAt, &dbs, &b.Pooled,
		&b.NodeID, &b.NodeEpoch, &b.HadSession, &b.ParentID)
	b.Layers, b.Databases = splitList(layers), splitList(dbs)
	b.TTL = time.Duration(ttl)
	b.CreatedAt, b.LastUsedAt, b.StateAt = fromNano(created), fromNano(used), fromNano(stateAt)
	return b, err
}

// InsertBranch records a new branch (normally in state Creating) and returns its ID.
// It fails with ErrExists if the source already has a branch of that name, and
// with ErrNoSource if the source is not recorded (removed meanwhile, perhaps by
// another node: DeleteSource and InsertBranch are ordered by the source's lock, and
// the insert checks the source in its own statement). Once
// this process has registered as a node, the row is the node's, and the insert
// happens only while the registration is the node's and the node is active
// (nodeFence); otherwise it fails with ErrNodeLost or ErrFenced.
func (c *Catalog) InsertBranch(ctx context.Context, b Branch, reason string) (_ int64, err error) {
	defer c.check(&err)
	cond, args, err := c.nodeFence(true)
	if err != nil {
		return 0, err
	}
	node, epoch := c.owner()
	var id int64
	err = c.tx(ctx, func(tx sqlTx) error {
		// The source is not removed while its new branch is recorded (DeleteSource).
		if err := c.d.lockSource(ctx, tx.tx, b.Source, false); err != nil {
			return err
		}
		// INSERT ... SELECT, not VALUES, so that the source's existence and the
		// fence are in the statement.
		err := tx.queryRow(ctx, `INSERT INTO branches (source, name, seed_id, parent, parent_id, layers, state, cow_mode, pid,
			ttl_ns, ephemeral, quota, roles, owned_bytes, create_ms, error, created_at, last_used_at, state_at, databases, pooled,
			node_id, node_epoch)
			SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
			WHERE EXISTS (SELECT 1 FROM sources WHERE name = ?)`+cond+` RETURNING id`,
			append([]any{b.Source, b.Name, b.SeedID, b.Parent, b.ParentID, joinList(b.Layers), b.State, b.CowMode, b.PID,
				int64(b.TTL), b.Ephemeral, b.Quota, b.Roles, b.OwnedBytes, b.CreateMS, b.Error,
				unixNano(b.CreatedAt), unixNano(b.LastUsedAt), unixNano(b.StateAt), joinList(b.Databases), b.Pooled,
				node, epoch, b.Source}, args...)...).Scan(&id)
		if c.d.isUnique(err) {
			return fmt.Errorf("branch %q of source %q: %w", b.Name, b.Source, ErrExists)
		}
		if errors.Is(err, sql.ErrNoRows) {
			return c.insertRefused(ctx, tx, b, cond != "")
		}
		if err != nil {
			return err
		}
		return logTransition(ctx, tx, b, "", b.State, reason)
	})
	return id, err
}

// insertRefused explains an InsertBranch that inserted no row: the node's
// registration (fenced, when fenced is set) or the source's absence. The
// source's lock, held by tx, keeps the answer what it was for the insert.
func (c *Catalog) insertRefused(ctx context.Context, tx sqlTx, b Branch, fenced bool) error {
	if fenced {
		if ferr := c.fenced(ctx, tx, true, 0, b.Name); ferr != nil {
			return ferr
		}
	}
	var n int
	if err := tx.queryRow(ctx, `SELECT count(*) FROM sources WHERE name = ?`, b.Source).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("branch %q of source %q: %w", b.Name, b.Source, ErrNoSource)
	}
	if !fenced {
		return fmt.Errorf("branch %q: the insert took no row", b.Name)
	}
	return fmt.Errorf("branch %q: the node took no new branch: %w", b.Name, ErrFenced)
}

// UpdateBranch writes every mutable field of b and, when its state differs from the
// stored one, appends a transition with reason. Once this process has registered
// as a node, the update applies only to a row the node owns under its epoch;
// otherwise it changes nothing and fails with ErrFenced.
func (c *Catalog) UpdateBranch(ctx context.Context, b Branch, reason string) (err error) {
	defer c.check(&err)
	cond, args, err := c.fence(false)
	if err != nil {
		return err
	}
	return c.tx(ctx, func(tx sqlTx) error {
		// The row stays locked until commit, so the transition logged is from the
		// state this update replaced (Postgres; SQLite has one writer), and the
		// fence checked here (the node row read FOR SHARE) holds for the update.
		var from State
		err := tx.queryRow(ctx, `SELECT state FROM branches WHERE id = ?`+cond+c.d.forUpdate(), append([]any{b.ID}, args...)...).Scan(&from)
		if errors.Is(err, sql.ErrNoRows) && cond != "" {
			return c.fenced(ctx, tx, false, b.ID, b.Name)
		}
		if err != nil {
			return noRows(err, fmt.Sprintf("branch %q", b.Name))
		}
		// seed_id too: a branch made from another takes its parent's seed
		// generation (fork.go's adopt), which need not be the source's newest.
		_, err = tx.exec(ctx, `UPDATE branches SET seed_id = ?, parent = ?, parent_id = ?, layers = ?, state = ?, cow_mode = ?, pid = ?,
			ttl_ns = ?, ephemeral = ?, quota = ?, roles = ?, owned_bytes = ?, create_ms = ?, error = ?, last_used_at = ?, state_at = ?, databases = ? WHERE id = ?`,
			b.SeedID, b.Parent, b.ParentID, joinList(b.Layers), b.State, b.CowMode, b.PID, int64(b.TTL), b.Ephemeral, b.Quota, b.Roles, b.OwnedBytes,
			b.CreateMS, b.Error, unixNano(b.LastUsedAt), unixNano(b.StateAt), joinList(b.Databases), b.ID)
		if err != nil || from == b.State {
			return err
		}
		return logTransition(ctx, tx, b, from, b.State, reason)
	})
}

// DeleteBranch removes a branch row and logs its end. Like UpdateBranch it is
// fenced once this process has registered, except that any live registration of
// any node may delete a row declared lost. A row b says is lost (b.State is
// Lost), whoever deletes it, a front included, is deleted by its id only while
// it is still lost, in the statement itself: a row that changed meanwhile (its id
// given to a new branch, which SQLite does once the row is gone) is not deleted,
// and the call fails with ErrFenced (or ErrNotFound when no row has the id).
func (c *Catalog) DeleteBranch(ctx context.Context, b Branch, reason string) (err error) {
	defer c.check(&err)
	me := c.node.Load()
	cond, args, err := c.nodeFenceOf(me, false)
	if err != nil {
		return err
	}
	switch {
	case b.State == Lost:
		cond = ` AND state = '` + string(Lost) + `'` + cond
	case cond != "":
		cond = ` AND (state = '` + string(Lost) + `' OR (1 = 1` + ownedCond + `))` + cond
		args = append([]any{me.id, me.epoch.Load()}, args...)
	}
	return c.tx(ctx, func(tx sqlTx) error {
		res, err := tx.exec(ctx, `DELETE FROM branches WHERE id = ?`+cond, append([]any{b.ID}, args...)...)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		switch {
		case n == 0 && b.State == Lost:
			return c.notLost(ctx, tx, b)
		case n == 0 && cond != "":
			return c.fenced(ctx, tx, false, b.ID, b.Name)
		case n == 0:
			return fmt.Errorf("branch %q: %w", b.Name, ErrNotFound)
		}
		return logTransition(ctx, tx, b, b.State, "gone", reason)
	})
}

// notLost explains a delete of a lost row that deleted nothing: this process's
// registration is gone (ErrNodeLost), no row has the id (ErrNotFound), or the row
// of that id is not lost (ErrFenced): not the row the caller saw.
func (c *Catalog) notLost(ctx context.Context, tx sqlTx, b Branch) error {
	if err := c.nodeRefusal(ctx, tx, false); err != nil {
		return err
	}
	var state State
	if err := tx.queryRow(ctx, `SELECT state FROM branches WHERE id = ?`, b.ID).Scan(&state); err != nil {
		return noRows(err, fmt.Sprintf("branch %q", b.Name))
	}
	return fmt.Errorf("branch %q: the row of id %d is %s, no longer the lost one: %w", b.Name, b.ID, state, ErrFenced)
}

// Branches lists every branch, by source and name.
func (c *Catalog) Branches(ctx context.Context) (_ []Branch, err error) {
	defer c.check(&err)
	rows, err := c.query(ctx, `SELECT `+branchCols+` FROM branches ORDER BY source, name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Branch
	for rows.Next() {
		b, err := scanBranch(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// Transition is one recorded change of a branch's state.
type Transition struct {
	At       time.Time
	Source   string
	Branch   string
	From, To string
	Reason   string
}

// Transitions returns the log for one branch name of a source, oldest first.
func (c *Catalog) Transitions(ctx context.Context, source, branch string) (_ []Transition, err error) {
	defer c.check(&err)
	rows, err := c.query(ctx, `SELECT at, source, branch, from_state, to_state, reason FROM transitions
		WHERE source = ? AND branch = ? ORDER BY id`, source, branch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Transition
	for rows.Next() {
		var t Transition
		var at int64
		if err := rows.Scan(&at, &t.Source, &t.Branch, &t.From, &t.To, &t.Reason); err != nil {
			return nil, err
		}
		t.At = fromNano(at)
		out = append(out, t)
	}
	return out, rows.Err()
}

func logTransition(ctx context.Context, tx sqlTx, b Branch, from, to State, reason string) error {
	_, err := tx.exec(ctx, `INSERT INTO transitions (at, source, branch, from_state, to_state, reason) VALUES (?, ?, ?, ?, ?, ?)`,
		time.Now().UnixNano(), b.Source, b.Name, string(from), string(to), reason)
	return err
}

// MarkHadSession records that a client session has used branch id (HadSession).
// Fenced like UpdateBranch; no transition is logged.
func (c *Catalog) MarkHadSession(ctx context.Context, id int64) (err error) {
	defer c.check(&err)
	cond, args, err := c.fence(false)
	if err != nil {
		return err
	}
	return c.tx(ctx, func(tx sqlTx) error {
		res, err := tx.exec(ctx, `UPDATE branches SET had_session = ? WHERE id = ?`+cond, append([]any{true, id}, args...)...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return nil
		}
		if cond != "" {
			return c.fenced(ctx, tx, false, id, fmt.Sprintf("branch %d", id))
		}
		return fmt.Errorf("branch %d: %w", id, ErrNotFound)
	})
}

// Touch records when each branch was last used, without logging a transition.
// Fenced like UpdateBranch, except that a branch not this node's is skipped
// rather than failing the others; a registration that is gone fails them all
// (ErrNodeLost).
func (c *Catalog) Touch(ctx context.Context, lastUsed map[int64]time.Time) (err error) {
	defer c.check(&err)
	cond, args, err := c.fence(false)
	if err != nil {
		return err
	}
	return c.tx(ctx, func(tx sqlTx) error {
		skipped := false
		for id, t := range lastUsed {
			res, err := tx.exec(ctx, `UPDATE branches SET last_used_at = ? WHERE id = ?`+cond, append([]any{unixNano(t), id}, args...)...)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				skipped = true
			}
		}
		if skipped && cond != "" {
			return c.fenced(ctx, tx, false, 0, "")
		}
		return nil
	})
}

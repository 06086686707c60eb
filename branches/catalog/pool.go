package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Claim is what a client's connection gives a warm pool member when it claims it.
type Claim struct {
	Name      string
	TTL       time.Duration
	Ephemeral bool
	Quota     int64
	At        time.Time
}

// ClaimBranch gives the pooled branch id its name and the options of the connection
// that claimed it, in one transaction. It fails with ErrNotFound if the branch is
// not (or no longer) pooled, and with ErrExists if the name is taken.
//
// A connection lost at the COMMIT leaves it unknown whether the claim was
// recorded; ClaimBranch then reads the row again (retrying while the catalog is
// unavailable, until ctx ends) and returns nil if it was, the error if it was not,
// and ErrClaimUnknown (with ErrUnavailable) if ctx ended before it could tell.
func (c *Catalog) ClaimBranch(ctx context.Context, id int64, cl Claim, reason string) (err error) {
	defer c.check(&err)
	atCommit, err := c.claim(ctx, id, cl, reason)
	if err == nil || !atCommit || !c.d.unavailable(err) {
		return err
	}
	claimed, rerr := c.claimed(ctx, id, cl.Name)
	switch {
	case rerr != nil:
		return fmt.Errorf("%w: %w (after %w)", ErrClaimUnknown, rerr, err)
	case claimed:
		return nil
	}
	return err
}

// ErrClaimUnknown: whether a claim was recorded could not be learned.
var ErrClaimUnknown = errors.New("whether the claim was recorded is unknown")

// claimed reads whether the branch id was claimed under name, retrying while the
// catalog is unavailable until ctx ends.
func (c *Catalog) claimed(ctx context.Context, id int64, name string) (bool, error) {
	wait := 20 * time.Millisecond
	for {
		var got string
		var pooled bool
		err := c.queryRow(ctx, `SELECT name, pooled FROM branches WHERE id = ?`, id).Scan(&got, &pooled)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		if err == nil {
			return !pooled && got == name, nil
		}
		if !c.d.unavailable(err) {
			return false, err
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("%w: %w", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

func (c *Catalog) claim(ctx context.Context, id int64, cl Claim, reason string) (atCommit bool, err error) {
	cond, args, err := c.fence(true)
	if err != nil {
		return false, err
	}
	node, epoch := c.owner()
	return c.txCommit(ctx, func(tx sqlTx) error {
		// Two claims of one member: on Postgres the second waits for the row lock,
		// then finds it no longer pooled (ErrNotFound); SQLite has one writer.
		var b Branch
		err := tx.queryRow(ctx, `SELECT source, name, state FROM branches WHERE id = ? AND pooled = ?`+cond+c.d.forUpdate(),
			append([]any{id, true}, args...)...).Scan(&b.Source, &b.Name, &b.State)
		if errors.Is(err, sql.ErrNoRows) && cond != "" {
			if ferr := c.fenced(ctx, tx, true, id, fmt.Sprintf("pooled branch %d", id)); errors.Is(ferr, ErrFenced) || errors.Is(ferr, ErrDraining) {
				return ferr
			}
		}
		if err != nil {
			return noRows(err, fmt.Sprintf("pooled branch %d", id))
		}
		// A claim is a connection's: its session follows (HadSession).
		_, err = tx.exec(ctx, `UPDATE branches SET name = ?, pooled = ?, ttl_ns = ?, ephemeral = ?, quota = ?,
			last_used_at = ?, node_id = ?, node_epoch = ?, had_session = ? WHERE id = ?`,
			cl.Name, false, int64(cl.TTL), cl.Ephemeral, cl.Quota, unixNano(cl.At), node, epoch, true, id)
		if c.d.isUnique(err) {
			return fmt.Errorf("branch %q of source %q: %w", cl.Name, b.Source, ErrExists)
		}
		if err != nil {
			return err
		}
		if err := logTransition(ctx, tx, b, b.State, "claimed", reason+": now "+cl.Name); err != nil {
			return err
		}
		b.Name = cl.Name
		return logTransition(ctx, tx, b, "pooled", b.State, reason)
	})
}

// SetSourceWarm sets how many pooled branches the source keeps; -1 means the
// server's default.
func (c *Catalog) SetSourceWarm(ctx context.Context, name string, warm int) (err error) {
	defer c.check(&err)
	res, err := c.exec(ctx, `UPDATE sources SET warm = ? WHERE name = ?`, warm, name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("source %q: %w", name, ErrNotFound)
	}
	return nil
}

package catalog

import (
	"context"
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
func (c *Catalog) ClaimBranch(ctx context.Context, id int64, cl Claim, reason string) (err error) {
	defer c.check(&err)
	return c.tx(ctx, func(tx sqlTx) error {
		// Two claims of one member: on Postgres the second waits for the row lock,
		// then finds it no longer pooled (ErrNotFound); SQLite has one writer.
		var b Branch
		if err := tx.queryRow(ctx, `SELECT source, name, state FROM branches WHERE id = ? AND pooled = ?`+c.d.forUpdate(), id, true).
			Scan(&b.Source, &b.Name, &b.State); err != nil {
			return noRows(err, fmt.Sprintf("pooled branch %d", id))
		}
		_, err := tx.exec(ctx, `UPDATE branches SET name = ?, pooled = ?, ttl_ns = ?, ephemeral = ?, quota = ?,
			last_used_at = ? WHERE id = ?`, cl.Name, false, int64(cl.TTL), cl.Ephemeral, cl.Quota, unixNano(cl.At), id)
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

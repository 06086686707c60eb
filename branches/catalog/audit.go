package catalog

import (
	"context"
	"fmt"
	"time"
)

// AuditEntry is one admin action: who did what to what, and how it ended.
type AuditEntry struct {
	ID     int64
	At     time.Time
	Actor  string // a token's name, or "local" for the admin socket
	Action string // e.g. "branch.create"
	Target string // e.g. the branch's name; "" when the action has none
	Result string // "ok", or the status and error
	Remote string // the client's address; "" on the admin socket
}

// AppendAudit adds an entry to the audit log.
func (c *Catalog) AppendAudit(ctx context.Context, e AuditEntry) (err error) {
	defer c.check(&err)
	_, err = c.exec(ctx,
		`INSERT INTO audit (at, actor, action, target, result, remote) VALUES (?, ?, ?, ?, ?, ?)`,
		unixNano(e.At), e.Actor, e.Action, e.Target, e.Result, e.Remote)
	if err != nil {
		return fmt.Errorf("append audit entry %s %s: %w", e.Action, e.Target, err)
	}
	return nil
}

// Audit returns the entries at or after since (the zero time: all), oldest first.
func (c *Catalog) Audit(ctx context.Context, since time.Time) (_ []AuditEntry, err error) {
	defer c.check(&err)
	rows, err := c.query(ctx,
		`SELECT id, at, actor, action, target, result, remote FROM audit WHERE at >= ? ORDER BY at, id`,
		unixNano(since))
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Target, &e.Result, &e.Remote); err != nil {
			return nil, fmt.Errorf("read audit log: %w", err)
		}
		e.At = fromNano(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

package catalog

import (
	"context"
	"fmt"
	"time"
)

// Swept is what one Janitor pass did.
type Swept struct {
	// Skipped: the catalog has not answered this process for deadAfter yet, so no
	// lease could be judged (a node's heartbeats may have failed on the same
	// outage).
	Skipped bool
	Dead    []string // nodes declared dead
	Lost    int      // their branches now Lost
	Deleted int      // their Creating rows, deleted
	Seeds   int      // their unfinished seed builds, deleted
	Sources []string // sources they were adding, left with no seed and no branch, deleted
}

// Janitor declares dead every node, other than this process's, whose lease ran out
// more than deadAfter ago by the catalog's clock; their branches become Lost and
// their Creating rows (a creation that never finished, with no data worth keeping)
// are deleted, and so are their unfinished seed builds, with the sources a build
// was the first seed of (a `source add` the node died in), so that the name can be
// added again. It does nothing while the catalog has answered this process for
// less than deadAfter: after an outage the nodes need that long to renew their
// leases. Any number of processes may run it at once: on Postgres each takes the
// nodes it sweeps with SKIP LOCKED, and a node already dead is not swept again.
func (c *Catalog) Janitor(ctx context.Context, deadAfter time.Duration) (_ Swept, err error) {
	defer c.check(&err)
	if c.Answering() < deadAfter {
		return Swept{Skipped: true}, nil
	}
	me, _, _ := c.Registration()
	var s Swept
	err = c.tx(ctx, func(tx sqlTx) error {
		s = Swept{}
		dead, err := scanColumn[string](tx.tx.QueryContext(ctx, c.d.rebind(`SELECT id FROM nodes WHERE state <> ? AND id <> ? AND lease_until < `+
			c.d.nowNanos()+` - ? ORDER BY id`+c.d.skipLocked()), NodeDead, me, int64(deadAfter)))
		if err != nil {
			return err
		}
		for _, id := range dead {
			if err := c.bury(ctx, tx, id, deadAfter, &s); err != nil {
				return fmt.Errorf("declare node %s dead: %w", id, err)
			}
			s.Dead = append(s.Dead, id)
		}
		return nil
	})
	if err != nil {
		return Swept{}, fmt.Errorf("janitor: %w", err)
	}
	return s, nil
}

// bury declares the node id dead and its branches lost, inside tx.
func (c *Catalog) bury(ctx context.Context, tx sqlTx, id string, deadAfter time.Duration, s *Swept) error {
	if _, err := tx.exec(ctx, `UPDATE nodes SET state = ? WHERE id = ?`, NodeDead, id); err != nil {
		return err
	}
	rows, err := tx.tx.QueryContext(ctx, c.d.rebind(`SELECT id, source, name, state FROM branches
		WHERE node_id = ? AND state <> ? ORDER BY id`+c.d.forUpdate()), id, Lost)
	if err != nil {
		return err
	}
	var bs []Branch
	for rows.Next() {
		var b Branch
		if err := rows.Scan(&b.ID, &b.Source, &b.Name, &b.State); err != nil {
			rows.Close()
			return err
		}
		bs = append(bs, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	reason := fmt.Sprintf("janitor: node %s gave no heartbeat for %s", id, deadAfter)
	if err := c.buryBuilds(ctx, tx, id, s); err != nil {
		return err
	}
	now := time.Now().UnixNano()
	for _, b := range bs {
		if b.State == Creating {
			if _, err := tx.exec(ctx, `DELETE FROM branches WHERE id = ?`, b.ID); err != nil {
				return err
			}
			s.Deleted++
			if err := logTransition(ctx, tx, b, b.State, "gone", reason); err != nil {
				return err
			}
			continue
		}
		if _, err := tx.exec(ctx, `UPDATE branches SET state = ?, state_at = ? WHERE id = ?`, Lost, now, b.ID); err != nil {
			return err
		}
		s.Lost++
		if err := logTransition(ctx, tx, b, b.State, Lost, reason); err != nil {
			return err
		}
	}
	return nil
}

// Answering is how long the catalog has answered this process: since Open, or
// since the last call that found it unavailable.
func (c *Catalog) Answering() time.Duration {
	return time.Duration(time.Now().UnixNano() - c.lastFail.Load())
}

// buryBuilds deletes the dead node id's unfinished seed builds, and each source
// that is left with no seed and no branch (the node died adding it), inside tx.
func (c *Catalog) buryBuilds(ctx context.Context, tx sqlTx, id string, s *Swept) error {
	sources, err := scanColumn[string](tx.tx.QueryContext(ctx, c.d.rebind(`SELECT DISTINCT source FROM seeds WHERE node_id = ? AND state <> ? ORDER BY source`), id, SeedReady))
	if err != nil {
		return err
	}
	res, err := tx.exec(ctx, `DELETE FROM seeds WHERE node_id = ? AND state <> ?`, id, SeedReady)
	if err != nil {
		return err
	}
	n, _ := res.RowsAffected()
	s.Seeds += int(n)
	for _, name := range sources {
		res, err := tx.exec(ctx, `DELETE FROM sources WHERE name = ? AND NOT EXISTS (SELECT 1 FROM seeds WHERE source = ?)
			AND NOT EXISTS (SELECT 1 FROM branches WHERE source = ?)`, name, name, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			s.Sources = append(s.Sources, name)
		}
	}
	return nil
}

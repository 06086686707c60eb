package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Source is a named origin of seeds: an SQL file, a URL, a data directory or an empty cluster.
type Source struct {
	Name            string
	Kind            string // "sql", "url", "datadir" or "empty"
	Spec            string // the file, URL or directory; "" for empty
	DefaultDatabase string
	Options         string // how its seeds are built (masking, restore options), encoded by the caller
	CreatedAt       time.Time
	Warm            int // pooled branches to keep; -1: the server's default
}

// SeedState is the state of one seed generation.
type SeedState string

// Seed states.
const (
	SeedBuilding SeedState = "building"
	SeedReady    SeedState = "ready"
)

// Seed is one settled, read-only generation of a source's data directory.
type Seed struct {
	ID         int64
	Source     string
	Generation int
	State      SeedState
	Dir        string // the data directory, the lowest overlay layer of its branches
	PGVersion  string // major version, from PG_VERSION
	Databases  []string
	Superuser  string
	Roles      string // the cluster's login roles, encoded by package roles
	CreatedAt  time.Time
	ReadyAt    time.Time
	// NodeID is the node that built it, whose disk holds Dir ("" before nodes, or
	// built by a process that did not register). Read only: AddSeed sets it.
	NodeID string
	// Manifest is the digest of the seed's manifest (package seedcopy), which the
	// nodes that copy it check; "" when none was made (a single server's seed).
	Manifest string
}

// The writes of sources and seeds are fenced by the node row (nodeFence): a
// source is added, and its seeds built, settled and removed, by the node whose
// state directory holds them (a seed row names a directory there), so a process
// whose registration is gone records none of it (ErrNodeLost). Seed rows carry no
// node; the fence is the node row alone.

// AddSource records a new source. It fails with ErrExists if the name is taken.
func (c *Catalog) AddSource(ctx context.Context, s Source) (err error) {
	defer c.check(&err)
	cond, args, err := c.nodeFence(false)
	if err != nil {
		return err
	}
	res, err := c.exec(ctx,
		`INSERT INTO sources (name, kind, spec, default_database, options, created_at, warm) SELECT ?, ?, ?, ?, ?, ?, ? WHERE 1 = 1`+cond,
		append([]any{s.Name, s.Kind, s.Spec, s.DefaultDatabase, s.Options, unixNano(s.CreatedAt), s.Warm}, args...)...)
	if c.d.isUnique(err) {
		return fmt.Errorf("source %q: %w", s.Name, ErrExists)
	}
	if err != nil {
		return err
	}
	return c.fencedNone(ctx, res, false)
}

// Sources lists every source, by name.
func (c *Catalog) Sources(ctx context.Context) (_ []Source, err error) {
	defer c.check(&err)
	rows, err := c.query(ctx, `SELECT name, kind, spec, default_database, options, created_at, warm FROM sources ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Source
	for rows.Next() {
		var s Source
		var created int64
		if err := rows.Scan(&s.Name, &s.Kind, &s.Spec, &s.DefaultDatabase, &s.Options, &created, &s.Warm); err != nil {
			return nil, err
		}
		s.CreatedAt = fromNano(created)
		out = append(out, s)
	}
	return out, rows.Err()
}

// DeleteSource removes a source and its seed rows. Branches must be gone first.
func (c *Catalog) DeleteSource(ctx context.Context, name string) (err error) {
	defer c.check(&err)
	cond, args, err := c.nodeFence(false)
	if err != nil {
		return err
	}
	return c.tx(ctx, func(tx sqlTx) error {
		// No branch of the source may be made meanwhile (InsertBranch holds the
		// lock shared), and none may exist on another node: its seed rows go.
		if err := c.d.lockSource(ctx, tx.tx, name, true); err != nil {
			return err
		}
		me, _ := c.owner()
		var others int
		if err := tx.queryRow(ctx, `SELECT count(*) FROM branches WHERE source = ? AND COALESCE(node_id, '') <> COALESCE(?, '')`,
			name, me).Scan(&others); err != nil {
			return err
		}
		if others > 0 {
			return fmt.Errorf("source %q: %d branches, pooled ones included: %w", name, others, ErrSourceHasBranches)
		}
		// On Postgres the node row stays locked FOR SHARE until commit: the fence
		// holds for the seeds' delete too.
		res, err := tx.exec(ctx, `DELETE FROM sources WHERE name = ?`+cond, append([]any{name}, args...)...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			if ferr := c.fenced(ctx, tx, false, 0, ""); ferr != nil {
				return ferr
			}
			return fmt.Errorf("source %q: %w", name, ErrNotFound)
		}
		if _, err := tx.exec(ctx, `DELETE FROM node_seeds WHERE seed_id IN (SELECT id FROM seeds WHERE source = ?)`, name); err != nil {
			return err
		}
		_, err = tx.exec(ctx, `DELETE FROM seeds WHERE source = ?`, name)
		return err
	})
}

// AddSeed records a seed generation in state SeedBuilding and returns it with its ID
// and the next generation number of its source.
func (c *Catalog) AddSeed(ctx context.Context, s Seed) (_ Seed, err error) {
	defer c.check(&err)
	cond, args, err := c.nodeFence(false)
	if err != nil {
		return Seed{}, err
	}
	err = c.tx(ctx, func(tx sqlTx) error {
		// Two seeds of one source at once would read the same MAX (Postgres;
		// SQLite has one writer).
		if err := c.d.lockSeeds(ctx, tx.tx, s.Source); err != nil {
			return err
		}
		if err := tx.queryRow(ctx, `SELECT COALESCE(MAX(generation), 0) + 1 FROM seeds WHERE source = ?`, s.Source).Scan(&s.Generation); err != nil {
			return err
		}
		s.State = SeedBuilding
		node, _ := c.owner()
		err := tx.queryRow(ctx,
			`INSERT INTO seeds (source, generation, state, dir, created_at, node_id) SELECT ?, ?, ?, ?, ?, ? WHERE 1 = 1`+cond+` RETURNING id`,
			append([]any{s.Source, s.Generation, s.State, s.Dir, unixNano(s.CreatedAt), node}, args...)...).Scan(&s.ID)
		if id, ok := node.(string); ok {
			s.NodeID = id
		}
		if errors.Is(err, sql.ErrNoRows) && cond != "" {
			if ferr := c.fenced(ctx, tx, false, 0, ""); ferr != nil {
				return ferr
			}
		}
		return err
	})
	return s, err
}

// UpdateSeed writes a seed's mutable fields (state, dir, version, databases, superuser, ready time, manifest).
func (c *Catalog) UpdateSeed(ctx context.Context, s Seed) (err error) {
	defer c.check(&err)
	cond, args, err := c.nodeFence(false)
	if err != nil {
		return err
	}
	res, err := c.exec(ctx,
		`UPDATE seeds SET state = ?, dir = ?, pg_version = ?, databases = ?, superuser = ?, roles = ?, ready_at = ?, manifest = ?
			WHERE id = ?`+cond,
		append([]any{s.State, s.Dir, s.PGVersion, joinList(s.Databases), s.Superuser, s.Roles, unixNano(s.ReadyAt), s.Manifest, s.ID}, args...)...)
	if err != nil {
		return err
	}
	return c.fencedNone(ctx, res, false)
}

// DeleteSeed removes one seed row.
func (c *Catalog) DeleteSeed(ctx context.Context, id int64) (err error) {
	defer c.check(&err)
	cond, args, err := c.nodeFence(false)
	if err != nil {
		return err
	}
	res, err := c.exec(ctx, `DELETE FROM seeds WHERE id = ?`+cond, append([]any{id}, args...)...)
	if err != nil {
		return err
	}
	return c.fencedNone(ctx, res, false)
}

// Seeds lists every seed, oldest first.
func (c *Catalog) Seeds(ctx context.Context) (_ []Seed, err error) {
	defer c.check(&err)
	rows, err := c.query(ctx,
		`SELECT id, source, generation, state, dir, pg_version, databases, superuser, roles, created_at, ready_at,
			COALESCE(node_id, ''), manifest FROM seeds ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Seed
	for rows.Next() {
		var s Seed
		var dbs string
		var created, ready int64
		if err := rows.Scan(&s.ID, &s.Source, &s.Generation, &s.State, &s.Dir, &s.PGVersion, &dbs, &s.Superuser, &s.Roles, &created, &ready, &s.NodeID, &s.Manifest); err != nil {
			return nil, err
		}
		s.Databases = splitList(dbs)
		s.CreatedAt, s.ReadyAt = fromNano(created), fromNano(ready)
		out = append(out, s)
	}
	return out, rows.Err()
}

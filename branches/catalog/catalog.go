package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// Catalog is the record of sources, seeds and branches, kept in SQLite or in
// Postgres (see Open). The same methods and the same SQL run on both; dialect.go
// holds what differs. The zero value is not usable; call Open. Safe for
// concurrent use.
type Catalog struct {
	db    *sql.DB
	d     dialect
	dsn   string
	stmts *stmtCache            // SQLite's prepared statements (stmtcache.go); nil on Postgres
	own   atomic.Pointer[owner] // the claim of Own, on Postgres

	node     atomic.Pointer[nodeReg] // this process's registration (nodes.go); nil: writes are not fenced
	lastFail atomic.Int64            // unix nanoseconds of the last call that found the catalog unavailable, or of Open
}

// Open opens the catalog at dsn, creating its tables if needed and adding the
// columns an older catalog lacks. A postgres:// or postgresql:// URL is a Postgres
// database (any role that may create tables in its current schema); anything else
// is a SQLite file path, with or without a sqlite:// prefix, created if missing.
// Other URL schemes and libpq keyword/value strings ("host=... dbname=...") are
// refused rather than taken for file names.
func Open(dsn string) (*Catalog, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c *Catalog
	var err error
	switch {
	case IsPostgres(dsn):
		c, err = openPostgres(ctx, dsn)
	case strings.HasPrefix(dsn, "sqlite://"):
		c, err = openSQLite(strings.TrimPrefix(dsn, "sqlite://"))
	case strings.Contains(dsn, "://"):
		return nil, fmt.Errorf("catalog %s: want a postgres:// or postgresql:// URL, or a SQLite file", Redact(dsn))
	case strings.Contains(dsn, "host=") || strings.Contains(dsn, "dbname="):
		return nil, errors.New("catalog: libpq keywords (host=, dbname=) are not a catalog; give a Postgres catalog as a postgres:// URL")
	default:
		c, err = openSQLite(dsn)
	}
	if err != nil {
		return nil, err
	}
	if err := c.setup(ctx); err != nil {
		c.db.Close()
		return nil, fmt.Errorf("catalog %s: %w", Redact(dsn), err)
	}
	c.lastFail.Store(time.Now().UnixNano())
	return c, nil
}

// IsPostgres reports whether dsn names a Postgres catalog rather than a SQLite file.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Backend is "sqlite" or "postgres".
func (c *Catalog) Backend() string { return c.d.name() }

// Close closes the database.
func (c *Catalog) Close() error {
	c.stmts.close()
	return c.db.Close()
}

// setup creates the tables and adds missing columns, in one transaction that,
// on Postgres, holds a lock so that processes opening the catalog at once do not
// race on the same DDL.
func (c *Catalog) setup(ctx context.Context) error {
	return c.tx(ctx, func(tx sqlTx) error {
		if err := c.d.lockSchema(ctx, tx.tx); err != nil {
			return fmt.Errorf("lock schema: %w", err)
		}
		if err := checkFormat(ctx, tx.tx, c.d); err != nil {
			return err
		}
		for _, stmt := range strings.Split(c.d.types().Replace(schema+schemaAdmin+schemaBinding+schemaAuthSecret+schemaNodes+schemaSeedCopies), ";") {
			if strings.TrimSpace(stmt) == "" {
				continue
			}
			if _, err := tx.tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("create schema: %w", err)
			}
		}
		if err := migrate(ctx, tx.tx, c.d, addedColumns); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		return nil
	})
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func joinList(s []string) string { return strings.Join(s, "\n") }

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func noRows(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}

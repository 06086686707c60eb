package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Catalog is the SQLite-backed record of sources, seeds and branches.
// The zero value is not usable; call Open. Safe for concurrent use.
type Catalog struct {
	db *sql.DB
}

// Open opens (creating if needed) the catalog database at path.
func Open(path string) (*Catalog, error) {
	// The catalog holds password verifiers: create it readable by its owner only
	// (SQLite gives its -wal and -shm files the same mode).
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create catalog: %w", err)
	}
	f.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("make catalog private: %w", err)
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(ON)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	// One writer at a time is what SQLite allows anyway; a single connection
	// also makes every statement see the previous one's effects.
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema + schemaAdmin); err != nil {
		db.Close()
		return nil, fmt.Errorf("create catalog schema in %s: %w", path, err)
	}
	if err := migrate(db, addedColumns); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate catalog %s: %w", path, err)
	}
	return &Catalog{db: db}, nil
}

// Close closes the database.
func (c *Catalog) Close() error { return c.db.Close() }

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

func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

func noRows(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}

type sqlTx = *sql.Tx

// tx runs fn in a transaction.
func (c *Catalog) tx(ctx context.Context, fn func(sqlTx) error) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

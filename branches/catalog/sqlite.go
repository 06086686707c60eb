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

// openSQLite opens (creating if needed) the catalog file at path.
func openSQLite(path string) (*Catalog, error) {
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
	dsn := "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(ON)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	// One writer at a time is what SQLite allows anyway; a single connection
	// also makes every statement see the previous one's effects, and makes every
	// transaction exclusive: no method needs a row lock on this backend.
	db.SetMaxOpenConns(1)
	if err := connectSQLite(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	return &Catalog{db: db, d: sqliteDialect{}, stmts: newStmtCache()}, nil
}

// connectSQLite opens the connection, whose pragmas switch a new file to WAL.
// That switch fails with SQLITE_BUSY, without waiting for busy_timeout, while
// another process makes the same switch (two commands opening a new catalog at
// once), so it is tried again for up to 5 s.
func connectSQLite(db *sql.DB) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := db.Ping()
		var se interface{ Code() int }
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqliteBusy || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sqliteBusy is SQLITE_BUSY, the primary result code of a locked database.
const sqliteBusy = 5

type sqliteDialect struct{}

var sqliteTypes = strings.NewReplacer(
	"<id>", "INTEGER PRIMARY KEY", "<int>", "INTEGER", "<bool>", "INTEGER", "<false>", "0",
	"<real>", "REAL", "<blob>", "BLOB", "<small>", "INTEGER")

func (sqliteDialect) name() string             { return "sqlite" }
func (sqliteDialect) rebind(q string) string   { return q }
func (sqliteDialect) types() *strings.Replacer { return sqliteTypes }
func (sqliteDialect) forUpdate() string        { return "" }
func (sqliteDialect) forShare() string         { return "" }
func (sqliteDialect) snapshot() *sql.TxOptions { return nil } // a read transaction sees one snapshot
func (sqliteDialect) isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// A file in the state directory does not go away the way a server does.
func (sqliteDialect) unavailable(error) bool { return false }
func (sqliteDialect) deadConn(error) bool    { return false }

// The single connection (openSQLite) already serializes every transaction.
func (sqliteDialect) lockSchema(context.Context, *sql.Tx) error        { return nil }
func (sqliteDialect) lockSeeds(context.Context, *sql.Tx, string) error { return nil }

// One writer at a time: a transaction already excludes every other.
func (sqliteDialect) lockSource(context.Context, *sql.Tx, string, bool) error { return nil }

// SQLite's own clock, in unix nanoseconds (julianday has millisecond precision).
func (sqliteDialect) nowNanos() string {
	return `(CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 1000000)`
}

// One writer at a time: no row is ever locked by another transaction.
func (sqliteDialect) skipLocked() string                       { return "" }
func (sqliteDialect) lockNodes(context.Context, *sql.Tx) error { return nil }

// An INTEGER PRIMARY KEY continues after the largest id in the table by itself.
func (sqliteDialect) afterCopy(context.Context, *sql.Tx, string) error { return nil }

func (sqliteDialect) columns(ctx context.Context, tx *sql.Tx, table string) (map[string]string, error) {
	rows, err := tx.QueryContext(ctx, "SELECT name, type FROM pragma_table_info(?)", table)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	defer rows.Close()
	cols := map[string]string{}
	for rows.Next() {
		var n, typ string
		if err := rows.Scan(&n, &typ); err != nil {
			return nil, fmt.Errorf("columns of %s: %w", table, err)
		}
		cols[n] = strings.ToLower(typ)
	}
	return cols, rows.Err()
}

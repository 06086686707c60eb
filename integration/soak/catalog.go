package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // reads a Postgres catalog
	_ "modernc.org/sqlite"             // reads a SQLite catalog
)

// catalogDB reads the catalog under test: the single server's SQLite file, or the
// Postgres database that fronts and nodes share. Each read opens and closes its own
// connection, so that the soak holds no reader that could keep SQLite's WAL from
// being checkpointed.
type catalogDB struct {
	driver, dsn string
	file        string // the SQLite file, whose size (with its WAL) is the catalog's
}

func sqliteCatalog(state string) catalogDB {
	file := filepath.Join(state, "catalog.db")
	return catalogDB{driver: "sqlite", dsn: "file:" + file + "?mode=ro&_pragma=busy_timeout(5000)", file: file}
}

func postgresCatalog(url string) catalogDB { return catalogDB{driver: "pgx", dsn: url} }

func (c catalogDB) open() (*sql.DB, error) {
	db, err := sql.Open(c.driver, c.dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// catalogStats is one reading of the catalog's size and row counts.
type catalogStats struct {
	bytes, transitions, branches int64
}

// stats reads the catalog's size (the SQLite file and its WAL, or the Postgres
// database's pg_database_size) and its transitions and branch rows.
func (c catalogDB) stats() (catalogStats, error) {
	var st catalogStats
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := c.open()
	if err != nil {
		return st, err
	}
	defer db.Close()
	if c.file != "" {
		st.bytes = fileSize(c.file) + fileSize(c.file+"-wal")
	} else if err := db.QueryRowContext(ctx, `SELECT pg_database_size(current_database())`).Scan(&st.bytes); err != nil {
		return st, fmt.Errorf("catalog size: %w", err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM transitions`).Scan(&st.transitions); err != nil {
		return st, fmt.Errorf("count transitions: %w", err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM branches`).Scan(&st.branches); err != nil {
		return st, fmt.Errorf("count branches: %w", err)
	}
	return st, nil
}

// branchRow is the part of a catalog branch row the end checks read.
type branchRow struct {
	id          int64
	source      string
	name, state string
	node        string // the owner node's id (a single server is its own node)
}

// rows reads every branch row.
func (c catalogDB) rows() ([]branchRow, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := c.open()
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rs, err := db.QueryContext(ctx, `SELECT id, source, name, state, COALESCE(node_id, '') FROM branches ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read branch rows: %w", err)
	}
	defer rs.Close()
	var out []branchRow
	for rs.Next() {
		var r branchRow
		if err := rs.Scan(&r.id, &r.source, &r.name, &r.state, &r.node); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rs.Err()
}

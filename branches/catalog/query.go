package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Every statement in this package is written once, with ? placeholders, and
// passes through these helpers, which rewrite it for the backend (dialect.rebind)
// and clean its text arguments (cleanText).

// cleanText makes s storable in a TEXT column of either backend: Postgres refuses
// NUL bytes and invalid UTF-8, which SQLite would keep, and free text (a
// transition's reason, an error message, an audit entry's result) can carry
// either from a client or a server's output. Invalid sequences become U+FFFD and
// NUL bytes are dropped, on both backends alike.
func cleanText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

// cleanArgs returns args with every string cleaned (cleanText).
func cleanArgs(args []any) []any {
	var out []any
	for i, a := range args {
		s, ok := a.(string)
		if !ok || cleanText(s) == s {
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		out[i] = cleanText(s)
	}
	if out == nil {
		return args
	}
	return out
}

func (c *Catalog) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := c.owned(ctx); err != nil {
		return nil, err
	}
	q := c.d.rebind(query)
	if st := c.stmts.outside(ctx, c.db, q); st != nil {
		return st.ExecContext(ctx, cleanArgs(args)...)
	}
	return c.db.ExecContext(ctx, q, cleanArgs(args)...)
}

func (c *Catalog) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	q := c.d.rebind(query)
	if st := c.stmts.outside(ctx, c.db, q); st != nil {
		return st.QueryContext(ctx, cleanArgs(args)...)
	}
	return c.db.QueryContext(ctx, q, cleanArgs(args)...)
}

func (c *Catalog) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	q := c.d.rebind(query)
	if st := c.stmts.outside(ctx, c.db, q); st != nil {
		return st.QueryRowContext(ctx, cleanArgs(args)...)
	}
	return c.db.QueryRowContext(ctx, q, cleanArgs(args)...)
}

// txn is a transaction whose statements are rewritten for the backend.
type txn struct {
	tx    *sql.Tx
	d     dialect
	stmts *stmtCache
}

type sqlTx = *txn

func (t *txn) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	q := t.d.rebind(query)
	if st := t.stmts.inTx(q); st != nil {
		return t.tx.StmtContext(ctx, st).ExecContext(ctx, cleanArgs(args)...)
	}
	return t.tx.ExecContext(ctx, q, cleanArgs(args)...)
}

func (t *txn) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	q := t.d.rebind(query)
	if st := t.stmts.inTx(q); st != nil {
		return t.tx.StmtContext(ctx, st).QueryRowContext(ctx, cleanArgs(args)...)
	}
	return t.tx.QueryRowContext(ctx, q, cleanArgs(args)...)
}

// tx runs fn in a transaction at the backend's default isolation (SQLite:
// serializable, one writer at a time; Postgres: read committed, so methods that
// read a row and then write what depends on it lock the row first, see
// dialect.forUpdate).
func (c *Catalog) tx(ctx context.Context, fn func(sqlTx) error) error {
	_, err := c.txCommit(ctx, fn)
	return err
}

// txCommit is tx, and reports whether the error, if any, came from the COMMIT:
// one whose reply was lost leaves it unknown whether the transaction committed.
func (c *Catalog) txCommit(ctx context.Context, fn func(sqlTx) error) (atCommit bool, err error) {
	if err := c.owned(ctx); err != nil {
		return false, err
	}
	tx, err := c.begin(ctx)
	if err != nil {
		return false, err
	}
	if err := fn(&txn{tx: tx, d: c.d, stmts: c.stmts}); err != nil {
		tx.Rollback()
		c.stmts.prepareWanted(ctx, c.db)
		return false, err
	}
	err = tx.Commit()
	c.stmts.prepareWanted(ctx, c.db)
	return true, err
}

// maxDeadConns bounds how many dead pooled connections begin passes over: after
// the catalog's server restarted, every connection in the pool is dead.
const maxDeadConns = 16

// begin begins a transaction. A pooled connection found dead when BEGIN is sent
// is closed by the driver; begin tries the next one, so that the first operation
// after the catalog comes back does not fail for the pool's stale connections.
func (c *Catalog) begin(ctx context.Context) (*sql.Tx, error) {
	for i := 0; ; i++ {
		tx, err := c.db.BeginTx(ctx, nil)
		if err == nil || i == maxDeadConns || !c.d.deadConn(err) {
			return tx, err
		}
	}
}

// check marks *err as ErrUnavailable when the backend says the database could not
// be reached; every exported method defers it.
func (c *Catalog) check(err *error) {
	if *err == nil {
		return
	}
	if errors.Is(*err, ErrUnavailable) || c.d.unavailable(*err) {
		c.lastFail.Store(time.Now().UnixNano())
	}
	if !errors.Is(*err, ErrUnavailable) && c.d.unavailable(*err) {
		*err = fmt.Errorf("%w: %w", ErrUnavailable, *err)
	}
}

// scanColumn reads every row of a one-column result, then closes rows; with err
// set (the query's), it returns that.
func scanColumn[T any](rows *sql.Rows, err error) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

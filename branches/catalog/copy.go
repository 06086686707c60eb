package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Copied is how many rows Copy wrote, by table.
type Copied map[string]int64

// Copy copies every row of every table of from into to, ids included, so that a
// host's catalog moves from one backend to the other (SQLite to Postgres or back).
// It reads from one snapshot of from and writes in one transaction on to: either
// every row arrives or none does. It fails with ErrNotEmpty if to has rows,
// unless force is set, in which case to's rows are deleted first, in the same
// transaction. Nothing else should write to either catalog meanwhile (stop the
// server).
func Copy(ctx context.Context, from, to *Catalog, force bool) (Copied, error) {
	src, err := from.db.BeginTx(ctx, from.d.snapshot())
	if err != nil {
		return nil, fmt.Errorf("read source catalog: %w", err)
	}
	defer src.Rollback()
	copied := Copied{}
	err = to.tx(ctx, func(dst sqlTx) error {
		if err := prepareDest(ctx, dst, force); err != nil {
			return err
		}
		for _, t := range tables {
			n, err := copyTable(ctx, src, dst, t)
			if err != nil {
				return fmt.Errorf("copy %s: %w", t.name, err)
			}
			copied[t.name] = n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return copied, nil
}

// prepareDest refuses a destination with rows, or with force empties it.
func prepareDest(ctx context.Context, dst sqlTx, force bool) error {
	for _, t := range tables {
		var n int64
		if err := dst.queryRow(ctx, "SELECT COUNT(*) FROM "+t.name).Scan(&n); err != nil {
			return fmt.Errorf("count rows of %s: %w", t.name, err)
		}
		if n == 0 {
			continue
		}
		if !force {
			return fmt.Errorf("destination table %s has %d rows: %w", t.name, n, ErrNotEmpty)
		}
		if _, err := dst.exec(ctx, "DELETE FROM "+t.name); err != nil {
			return fmt.Errorf("empty %s: %w", t.name, err)
		}
	}
	return nil
}

// copyTable copies the rows of one table, column by column of the same name,
// converting values where the backends store a type differently.
func copyTable(ctx context.Context, src *sql.Tx, dst sqlTx, t table) (int64, error) {
	types, err := dst.d.columns(ctx, dst.tx, t.name)
	if err != nil {
		return 0, err
	}
	rows, err := src.QueryContext(ctx, "SELECT * FROM "+t.name)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return 0, err
	}
	for _, c := range cols {
		if _, ok := types[c]; !ok {
			return 0, fmt.Errorf("destination has no column %s (is it older than the source?)", c)
		}
	}
	ins, err := dst.tx.PrepareContext(ctx, dst.d.rebind(fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)",
		t.name, strings.Join(cols, ", "), strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", "))))
	if err != nil {
		return 0, err
	}
	defer ins.Close()
	vals, ptrs := make([]any, len(cols)), make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var n int64
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return n, err
		}
		for i, c := range cols {
			vals[i] = convert(vals[i], types[c])
		}
		if _, err := ins.ExecContext(ctx, vals...); err != nil {
			return n, fmt.Errorf("row %d: %w", n+1, err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return n, err
	}
	if t.serial {
		return n, dst.d.afterCopy(ctx, dst.tx, t.name)
	}
	return n, nil
}

// convert adapts a value read from one backend to a destination column type:
// SQLite keeps booleans as integers and may keep a whole REAL as an integer, and
// text it stored before cleanText existed may hold what Postgres refuses.
func convert(v any, destType string) any {
	switch x := v.(type) {
	case string:
		return cleanText(x)
	case int64:
		switch destType {
		case "boolean":
			return x != 0
		case "double precision", "real":
			return float64(x)
		}
	}
	return v
}

package catalog

import (
	"context"
	"database/sql"
	"errors"
)

// RowRef names one branch row: its id, source and name.
type RowRef struct {
	ID     int64
	Source string
	Name   string
}

// RowsOf returns the id, source and name of every branch row of the node id,
// lost ones included, by id. Safe for concurrent use.
func (c *Catalog) RowsOf(ctx context.Context, node string) (_ map[int64]RowRef, err error) {
	defer c.check(&err)
	rows, err := c.query(ctx, `SELECT id, source, name FROM branches WHERE node_id = ?`, node)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]RowRef{}
	for rows.Next() {
		var r RowRef
		if err := rows.Scan(&r.ID, &r.Source, &r.Name); err != nil {
			return nil, err
		}
		out[r.ID] = r
	}
	return out, rows.Err()
}

// RowOf returns what the branch row id names, and the node that has it ("" for
// none); ErrNotFound when no row has the id.
func (c *Catalog) RowOf(ctx context.Context, id int64) (_ RowRef, node string, err error) {
	defer c.check(&err)
	r := RowRef{ID: id}
	var n sql.NullString
	err = c.queryRow(ctx, `SELECT source, name, node_id FROM branches WHERE id = ?`, id).Scan(&r.Source, &r.Name, &n)
	if errors.Is(err, sql.ErrNoRows) {
		return RowRef{}, "", noRows(err, "branch row")
	}
	return r, n.String, err
}

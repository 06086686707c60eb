package dbdiff

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Table is one table (or materialized view) of a database.
type Table struct {
	Name  string   `json:"name"`            // schema-qualified, quoted where needed
	Rows  int64    `json:"rows"`            // count(*)
	Bytes int64    `json:"bytes"`           // pg_total_relation_size
	Files []string `json:"files,omitempty"` // data files of the table, its TOAST and indexes, relative to PGDATA
}

// Database is what a snapshot keeps of one database.
type Database struct {
	Schema string  `json:"schema"` // normalized pg_dump --schema-only
	Tables []Table `json:"tables"`
	// Normalized is the NormalizeVersion Schema was made with; 0 is version 1.
	Normalized int `json:"normalized,omitempty"`
}

// Snapshot is the schema and tables of every database of a cluster, by name.
type Snapshot map[string]Database

const tablesSQL = `
SELECT format('%I.%I', n.nspname, c.relname),
       pg_total_relation_size(c.oid),
       array_remove(ARRAY[pg_relation_filepath(c.oid),
             CASE WHEN c.reltoastrelid <> 0 THEN pg_relation_filepath(c.reltoastrelid) END,
             (SELECT pg_relation_filepath(i.indexrelid) FROM pg_index i WHERE c.reltoastrelid <> 0 AND i.indrelid = c.reltoastrelid LIMIT 1)]
           || ARRAY(SELECT pg_relation_filepath(i.indexrelid) FROM pg_index i WHERE i.indrelid = c.oid), NULL)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'm') AND c.relpersistence <> 't'
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'
ORDER BY 1`

// ReadTables lists the user tables of the database c is connected to, with exact
// row counts (one count(*) each).
func ReadTables(ctx context.Context, c *pgx.Conn) ([]Table, error) {
	rows, err := c.Query(ctx, tablesSQL)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Table, error) {
		var t Table
		err := r.Scan(&t.Name, &t.Bytes, &t.Files)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	for i := range out {
		// Name is already quoted by format('%I.%I').
		if err := c.QueryRow(ctx, "SELECT count(*) FROM "+out[i].Name).Scan(&out[i].Rows); err != nil {
			return nil, fmt.Errorf("count rows of %s: %w", out[i].Name, err)
		}
	}
	return out, nil
}

// TableDiff compares one table in a base and in a branch.
type TableDiff struct {
	Database  string `json:"database"`
	Table     string `json:"table"`
	Status    string `json:"status"` // "same", "changed" (row count), "added" or "removed"
	BaseRows  int64  `json:"base_rows"`
	Rows      int64  `json:"rows"`
	BaseBytes int64  `json:"base_bytes"`
	Bytes     int64  `json:"bytes"`
	Owned     int64  `json:"owned_bytes"` // bytes of the table's files that the branch owns
}

// CompareTables pairs the tables of base and cur by database and name.
func CompareTables(base, cur Snapshot) []TableDiff {
	var out []TableDiff
	for _, db := range DatabaseNames(base, cur) {
		bt := index(base[db].Tables)
		ct := index(cur[db].Tables)
		for name, t := range ct {
			d := TableDiff{Database: db, Table: name, Rows: t.Rows, Bytes: t.Bytes, Status: "added"}
			if b, ok := bt[name]; ok {
				d.BaseRows, d.BaseBytes, d.Status = b.Rows, b.Bytes, "same"
				if b.Rows != t.Rows {
					d.Status = "changed"
				}
			}
			out = append(out, d)
		}
		for name, b := range bt {
			if _, ok := ct[name]; !ok {
				out = append(out, TableDiff{Database: db, Table: name, Status: "removed", BaseRows: b.Rows, BaseBytes: b.Bytes})
			}
		}
	}
	slices.SortFunc(out, func(a, b TableDiff) int {
		return cmp.Or(cmp.Compare(a.Database, b.Database), cmp.Compare(a.Table, b.Table))
	})
	return out
}

// DatabaseNames is the sorted union of the databases of the snapshots.
func DatabaseNames(snaps ...Snapshot) []string {
	var names []string
	for _, s := range snaps {
		for n := range s {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	return names
}

func index(ts []Table) map[string]Table {
	m := make(map[string]Table, len(ts))
	for _, t := range ts {
		m[t.Name] = t
	}
	return m
}

package catalog

import (
	"database/sql"
	"fmt"
)

// column is a column added to a table after the table's first release. Columns are
// added at Open when missing, so an older state directory keeps working; the order
// of the list does not matter.
type column struct {
	table, name, def string
}

// addedColumns lists every column added after its table's CREATE TABLE in schema.
// Append new columns here (and never to the CREATE TABLE of an existing table).
var addedColumns = []column{
	{"branches", "pooled", "INTEGER NOT NULL DEFAULT 0"},  // a warm pool member, not yet claimed
	{"sources", "warm", "INTEGER NOT NULL DEFAULT -1"},    // pool size; -1: the server's --warm
	{"branches", "databases", "TEXT NOT NULL DEFAULT ''"}, // read with the roles; the 3D000 check of a new branch's base
	{"sources", "options", "TEXT NOT NULL DEFAULT ''"},
}

// migrate adds the columns of cols that the database lacks.
func migrate(db *sql.DB, cols []column) error {
	for _, c := range cols {
		have, err := hasColumn(db, c.table, c.name)
		if err != nil {
			return err
		}
		if have {
			continue
		}
		if _, err := db.Exec(fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", c.table, c.name, c.def)); err != nil {
			return fmt.Errorf("add column %s.%s: %w", c.table, c.name, err)
		}
	}
	return nil
}

func hasColumn(db *sql.DB, table, name string) (bool, error) {
	rows, err := db.Query("SELECT name FROM pragma_table_info(?)", table)
	if err != nil {
		return false, fmt.Errorf("columns of %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return false, err
		}
		if n == name {
			return true, nil
		}
	}
	return false, rows.Err()
}

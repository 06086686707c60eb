package catalog

import (
	"context"
	"database/sql"
	"fmt"
)

// column is a column added to a table after the table's first release. Columns are
// added at Open when missing, so an older state directory keeps working; the order
// of the list does not matter. def uses the type tokens of schema.go.
type column struct {
	table, name, def string
}

// addedColumns lists every column added after its table's CREATE TABLE in schema.
// Append new columns here (and never to the CREATE TABLE of an existing table).
var addedColumns = []column{
	{"branches", "pooled", "<bool> NOT NULL DEFAULT <false>"}, // a warm pool member, not yet claimed
	{"sources", "warm", "<int> NOT NULL DEFAULT -1"},          // pool size; -1: the server's --warm
	{"branches", "databases", "TEXT NOT NULL DEFAULT ''"},     // read with the roles; the 3D000 check of a new branch's base
	{"sources", "options", "TEXT NOT NULL DEFAULT ''"},
	// The node that owns the branch and its epoch when it took it (nodes.go); NULL
	// on rows from before nodes, which the first node to register adopts.
	{"branches", "node_id", "TEXT"},
	{"branches", "node_epoch", "<int>"},
	// The node that built the seed (its directory is on that node's disk); NULL on
	// seeds from before nodes and seeds built by a process that did not register.
	{"seeds", "node_id", "TEXT"},
	// The digest of the seed's manifest (package seedcopy), which a node copying
	// the seed checks the builder's manifest against; '' before copies.
	{"seeds", "manifest", "TEXT NOT NULL DEFAULT ''"},
	// Where other nodes fetch this node's seeds (its peer listener); '' for none.
	{"nodes", "peer_addr", "TEXT NOT NULL DEFAULT ''"},
	// Drained by an operator (drain.go): no new branches; kept across registrations.
	{"nodes", "drained", "<bool> NOT NULL DEFAULT <false>"},
	// A client session has used the branch (Branch.HadSession).
	{"branches", "had_session", "<bool> NOT NULL DEFAULT <false>"},
	// The parent's id as of the fork (Branch.ParentID); 0 on rows from before.
	{"branches", "parent_id", "<int> NOT NULL DEFAULT 0"},
}

// migrate adds the columns of cols that the database lacks, inside tx.
func migrate(ctx context.Context, tx *sql.Tx, d dialect, cols []column) error {
	for _, c := range cols {
		have, err := d.columns(ctx, tx, c.table)
		if err != nil {
			return err
		}
		if len(have) == 0 {
			return fmt.Errorf("add column %s.%s: no table %s", c.table, c.name, c.table)
		}
		if _, ok := have[c.name]; ok {
			continue
		}
		stmt := fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", c.table, c.name, d.types().Replace(c.def))
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("add column %s.%s: %w", c.table, c.name, err)
		}
	}
	return nil
}

package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Format is the catalog's format as this build writes it. A release after which
// an older build would misread the catalog (a state, a table or a column whose
// meaning it would not respect) raises it. Open refuses a catalog of a higher
// format, so that an older pgbranchproxy started on a newer state directory (a
// rollback) stops with a message instead of acting on what it cannot read; it
// raises a lower one, or records it in a catalog from before formats (which older
// builds, knowing nothing of formats, still open: they all read Format 1).
const Format = 1

// ErrNewerFormat is returned (wrapped) by Open for a catalog a newer release wrote.
var ErrNewerFormat = errors.New("the catalog was written by a newer pgbranchproxy")

// schemaFormat holds at most one row: the catalog's format. Copy does not carry
// it: the destination's Open has recorded its own.
const schemaFormat = `
CREATE TABLE IF NOT EXISTS catalog_format (
	one     <int> PRIMARY KEY CHECK (one = 1),
	version <int> NOT NULL
);
`

// checkFormat refuses a catalog of a format above Format and records Format in
// one below it, inside setup's transaction and before any other change to it.
func checkFormat(ctx context.Context, tx *sql.Tx, d dialect) error {
	if _, err := tx.ExecContext(ctx, d.types().Replace(schemaFormat)); err != nil {
		return fmt.Errorf("create format table: %w", err)
	}
	var have int64
	err := tx.QueryRowContext(ctx, "SELECT version FROM catalog_format WHERE one = 1").Scan(&have)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = tx.ExecContext(ctx, d.rebind("INSERT INTO catalog_format (one, version) VALUES (1, ?)"), Format)
	case err != nil:
	case have > Format:
		return fmt.Errorf("%w (its format is %d, this one's %d): run that release or a later one, or restore the state directory's backup from before it", ErrNewerFormat, have, Format)
	case have < Format:
		_, err = tx.ExecContext(ctx, d.rebind("UPDATE catalog_format SET version = ? WHERE one = 1"), Format)
	}
	if err != nil {
		return fmt.Errorf("record the catalog's format: %w", err)
	}
	return nil
}

// Package catalog is the durable record of sources, seed generations and branches,
// kept in a SQLite database under the state directory (the default) or in a
// Postgres database (a postgres:// URL; the first step towards several hosts
// sharing one catalog, see docs/scale-out.md).
//
// Every lifecycle step of a branch is written here before its side effect starts
// (state "creating", "starting", "stopping", "resetting", "destroying") and again when
// it has finished, so that a crash at any point leaves enough behind for reconcile to
// finish or roll back the step at the next start. Each change of state also appends a
// row to the transitions log with its reason.
//
// Both backends run the same statements through the same *Catalog methods; what
// differs (placeholders, column types, unique violations, locks) is in a dialect
// (dialect.go, sqlite.go, postgres.go), and one conformance suite runs every test
// against both. Copy moves a catalog's rows from one backend to the other.
//
// A server registers in the catalog as a node (nodes.go): an id, a slot, an epoch
// that goes up at every registration, and a lease that heartbeats renew, in the
// catalog's clock. Once registered, every change a *Catalog writes to a branch row
// is fenced by that node and epoch (ErrFenced), and Janitor declares nodes whose
// lease ran out dead and their branches lost (janitor.go).
//
// A *Catalog is safe for concurrent use.
package catalog

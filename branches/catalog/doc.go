// Package catalog is the durable record of sources, seed generations and branches,
// kept in a SQLite database under the state directory.
//
// Every lifecycle step of a branch is written here before its side effect starts
// (state "creating", "starting", "stopping", "resetting", "destroying") and again when
// it has finished, so that a crash at any point leaves enough behind for reconcile to
// finish or roll back the step at the next start. Each change of state also appends a
// row to the transitions log with its reason.
//
// A *Catalog is safe for concurrent use.
package catalog

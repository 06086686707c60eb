// Package failpoint injects faults at named points of the branch engine, for tests.
//
// A Set is parsed once, at start-up, from a specification that only tests give
// (serve reads it from the PGBRANCH_FAILPOINTS environment variable), and is passed
// to the engine in its configuration. A nil *Set is the production case: every Hit
// on it returns nil at once.
package failpoint

// Package router decides where one client connection goes, from nothing but the
// parameters of its StartupMessage.
//
// A client names a branch in the database parameter as DB@BRANCH (split on the last
// '@'; a literal "%40" is accepted from clients that do not decode URLs). DB alone goes
// to the default branch. Per-connection settings are given as pgbranch.* options, either
// in the startup "options" parameter (-c pgbranch.ttl=1h) or as startup parameters of
// their own; Parse extracts them and returns the startup parameters to forward to
// Postgres with every pgbranch.* setting removed.
//
// Accepted branch names become directory and process names, so they are held to
// ValidBranchName: 1-63 characters of a-z, 0-9 and '-', never '/', '.', NUL or uppercase.
//
// The package is pure: it does no I/O, keeps no state and does not log, so all of its
// functions are safe for concurrent use. Its errors are *Error values that wrap one of
// the sentinels in errors.go and carry a client-facing message and hint.
package router

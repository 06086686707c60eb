// Package roles reads the login roles of a Postgres cluster (pg_authid) so the proxy
// can authenticate clients before a branch exists or while it is stopped.
//
// A Set is immutable once built and safe for concurrent use.
package roles

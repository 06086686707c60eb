// Package catalogtest starts a throwaway Postgres server for tests that need a
// Postgres catalog: the catalog package's conformance suite and the integration
// suite's Postgres-catalog run. It needs root (the server runs as OS user
// postgres) and the PostgreSQL 15 binaries.
package catalogtest

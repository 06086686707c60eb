package catalog

// TestPostgresDSN returns the URL of a new, empty database on the package's test
// Postgres server (postgres_internal_test.go).
var TestPostgresDSN = testPostgresDSN

// TestNeedPostgres skips the test under -short and fails it without root.
var TestNeedPostgres = needPostgres

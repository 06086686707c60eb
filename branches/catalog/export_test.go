package catalog

import "time"

// TestPostgresDSN returns the URL of a new, empty database on the package's test
// Postgres server (postgres_internal_test.go).
var TestPostgresDSN = testPostgresDSN

// TestNeedPostgres skips the test under -short and fails it without root.
var TestNeedPostgres = needPostgres

// TestSetAnswering makes c behave as if the catalog had answered it for d.
var TestSetAnswering = func(c *Catalog, d time.Duration) { c.lastFail.Store(time.Now().Add(-d).UnixNano()) }

// SetProbeEvery sets how often a quiet watch checks that it still hears.
func SetProbeEvery(d time.Duration) (restore func()) {
	old := probeEvery
	probeEvery = d
	return func() { probeEvery = old }
}

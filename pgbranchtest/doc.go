// Package pgbranchtest gives each Go test a Postgres database of its own: a branch,
// through a running pgbranchproxy, of a seed that already holds the schema.
//
//	func TestUsers(t *testing.T) {
//		t.Parallel()
//		db, err := sql.Open("pgx", pgbranchtest.URL(t, pgbranchtest.WithMigrations("migrations", "")))
//		...
//	}
//
// URL names the branch after the test (plus a random part), creates it ephemeral
// (destroyed when its last session ends) and holds one session on it until the test
// ends. When the test passed that session closes and the branch goes; when it failed
// the branch is kept for an hour (WithKeepFor) and its connection string is logged
// (with the password, if PGBRANCH_URL has one, written xxxxx).
// A test that panics is not one of them: Go runs its cleanups before it records the
// panic, so they see a test that has not failed, and its branch goes; fail with
// t.Fatal or t.Error to keep it.
//
// WithMigrations runs the migrations once per hash and seed generation of the
// source into a template, a source the server seeds from the migrated branch
// (`source add --from-branch`), and every test branches from that template; after a
// `source refresh` the next run migrates the new seed, and removes the templates of
// older generations once no branch uses them. Test binaries of one `go test ./...` coordinate through
// the server: the first to create the template's migration branch runs the migrations,
// the others wait for the template source to appear. A binary killed while it
// migrates loses its session on that branch, which goes with it, so the next one
// migrates at once.
//
// Warm, from TestMain, has the server start branches of the tests' source ahead of
// them (its warm pool), so that each test's URL claims a running branch.
//
// Configuration comes from options, else the environment: PGBRANCH_URL (the proxy,
// e.g. postgres://postgres@127.0.0.1:6432/app?sslmode=disable), PGBRANCH_ADMIN_URL
// (http://host:port of --admin-listen, or a path to admin.sock), PGBRANCH_ADMIN_TOKEN,
// PGBRANCH_STATE_DIR (its admin.sock, when PGBRANCH_ADMIN_URL is unset; default
// /var/lib/pgbranchproxy) and PGBRANCH_SOURCE.
//
// Every function is safe for concurrent use by parallel tests.
package pgbranchtest

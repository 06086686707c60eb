package pgbranchtest_test

import (
	"database/sql"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/pgbranchproxy/pgbranchproxy/pgbranchtest"
)

// A test file of your own: every test gets a branch of a template that holds the
// migrations (run once for all tests and packages), destroyed when the test passes.
// Run it with PGBRANCH_URL=postgres://postgres@127.0.0.1:6432/app go test ./...
func Example() {
	migrations := pgbranchtest.WithMigrations("testdata/migrations", "")
	testSignup := func(t *testing.T) {
		t.Parallel()
		db, err := sql.Open("pgx", pgbranchtest.URL(t, migrations))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if _, err := db.Exec("INSERT INTO users (email) VALUES ('new@example.com')"); err != nil {
			t.Fatal(err)
		}
	}
	_ = testSignup // func TestSignup(t *testing.T) { ... } in your _test.go file
}

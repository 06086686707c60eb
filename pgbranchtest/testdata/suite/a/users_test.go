package a

import (
	"database/sql"
	"fmt"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/pgbranchproxy/pgbranchproxy/pgbranchtest"
	"github.com/pgbranchproxy/pgbranchproxy/pgbranchtest/testdata/suite"
)

// TestUsers runs 15 parallel tests with database/sql, each on a branch of its own.
func TestUsers(t *testing.T) {
	for i := range 15 {
		t.Run(fmt.Sprintf("user_%02d", i), func(t *testing.T) {
			t.Parallel()
			db, err := sql.Open("pgx", pgbranchtest.URL(t, suite.Migrations))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			email := fmt.Sprintf("user%02d@example.com", i)
			if _, err := db.Exec("INSERT INTO users (email) VALUES ($1)", email); err != nil {
				t.Fatal(err)
			}
			// The migrated row and this test's row, and nothing another test wrote.
			var n int
			var emails string
			if err := db.QueryRow("SELECT count(*), string_agg(email, ',' ORDER BY id) FROM users").Scan(&n, &emails); err != nil {
				t.Fatal(err)
			}
			if want := "admin@example.com," + email; n != 2 || emails != want {
				t.Errorf("users: %d rows %q, want %q", n, emails, want)
			}
		})
	}
}

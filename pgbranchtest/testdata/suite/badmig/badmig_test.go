// Package badmig is a suite whose migration fails: every test that waits for it
// must fail with the migration's own error, not wait out its timeout.
package badmig

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgbranchproxy/pgbranchproxy/pgbranchtest"
)

// migrate fails inside a session, as a broken .sql file does: its branch still
// has that session when the migration returns.
func migrate(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SELECT 1/0")
	return err
}

func TestBadMigration(t *testing.T) {
	for i := range 4 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			pgbranchtest.URL(t, pgbranchtest.WithMigrations(pgbranchtest.MigrateFunc(migrate), "badmig-v1"),
				pgbranchtest.WithTimeout(60*time.Second))
		})
	}
}

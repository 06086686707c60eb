// Package diedmig is a suite whose test binary may die while it migrates: with
// PGBRANCHTEST_HANG set to a file, the migration creates that file and blocks until
// the binary is killed; the next run must migrate at once, not wait for the dead
// binary's migration branch to go.
package diedmig

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgbranchproxy/pgbranchproxy/pgbranchtest"
)

func migrate(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE migrated (id int)"); err != nil {
		return err
	}
	if f := os.Getenv("PGBRANCHTEST_HANG"); f != "" {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func TestMigrated(t *testing.T) {
	url := pgbranchtest.URL(t, pgbranchtest.WithMigrations(pgbranchtest.MigrateFunc(migrate), "diedmig-v1"),
		pgbranchtest.WithTimeout(60*time.Second))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT FROM migrated"); err != nil {
		t.Fatal(err)
	}
}

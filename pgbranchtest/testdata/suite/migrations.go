// Package suite holds what the test packages under it share: migrations that also
// record each run in $PGBRANCHTEST_RUNS, so the end-to-end test can count them.
package suite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/pgbranchproxy/pgbranchproxy/pgbranchtest"
)

// Migrations is the option every test of the suite uses.
var Migrations = pgbranchtest.WithMigrations(migrate, "suite-v1")

func migrate(ctx context.Context, url string) error {
	if f := os.Getenv("PGBRANCHTEST_RUNS"); f != "" {
		out, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, os.Getpid())
		out.Close()
	}
	_, file, _, _ := runtime.Caller(0)
	return pgbranchtest.SQLFiles(filepath.Join(filepath.Dir(file), "..", "migrations"))(ctx, url)
}

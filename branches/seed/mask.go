package seed

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
)

// mask runs the masking SQL in req.Database, then rewrites every table of every
// database so that no page keeps an original value:
//
//   - ANALYZE first, so that pg_statistic's live rows (most common values, histogram
//     bounds) describe the masked data, not the original;
//   - VACUUM FULL of every table, catalogs included: each is copied to a new file
//     holding only live tuples (dropped columns nulled) and its indexes are rebuilt,
//     and the old files are unlinked. Dead tuples, free space in pages and index
//     entries of the original values go with them.
//
// The WAL that held the original values (the load, and the full-page images the
// masking's own updates logged) is all before settle's CHECKPOINT and WAL switch, and
// trimWAL removes every segment before the one holding the shutdown checkpoint.
func (b *Builder) mask(ctx context.Context, srv *server, version, superuser string, req Request, progress func(string)) error {
	before, err := srv.databases(ctx, superuser)
	if err != nil {
		return err
	}
	if !slices.Contains(before, req.Database) {
		return fmt.Errorf("mask SQL: database %q does not exist: the mask runs in --database (one of %s)",
			req.Database, strings.Join(before, ", "))
	}
	progress("masking: running the mask SQL in " + req.Database)
	req.Version = version
	if err := b.run(ctx, req, runtime.Job{Prog: "psql", Stdin: strings.NewReader(req.Mask), Paths: []string{srv.sockDir}}, func(string) {},
		// Terse: an error's DETAIL and CONTEXT quote rows ("Key (email)=(...)",
		// "Failing row contains ..."), original values that must not reach the
		// audit log or the server's.
		"-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=terse", "-v", "SHOW_CONTEXT=never",
		"-h", srv.sockDir, "-U", superuser, "-d", req.Database, "-f", "-"); err != nil {
		return fileError(err, "mask SQL: ", "line ")
	}
	// Read again: the mask may have made or dropped databases.
	dbs, err := srv.databases(ctx, superuser)
	if err != nil {
		return err
	}
	for _, db := range dbs {
		start := time.Now()
		progress("masking: ANALYZE and VACUUM FULL in " + db)
		for _, sql := range []string{"ANALYZE", "VACUUM FULL"} {
			if err := srv.exec(ctx, superuser, db, sql); err != nil {
				return fmt.Errorf("masking: %s in %q: %w", sql, db, err)
			}
		}
		progress(fmt.Sprintf("  %s rewritten in %s", db, time.Since(start).Round(time.Millisecond)))
	}
	return nil
}

// databases lists the databases that accept connections.
func (s *server) databases(ctx context.Context, superuser string) ([]string, error) {
	c, err := s.connect(ctx, superuser, "template1")
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	rows, err := c.Query(ctx, "SELECT datname FROM pg_database WHERE datallowconn ORDER BY datname")
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

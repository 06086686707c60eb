package seed

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
)

// controlData is pg_controldata's fields for the data directory dir.
func (b *Builder) controlData(ctx context.Context, dir, version, image string) (map[string]string, error) {
	var out bytes.Buffer
	if err := b.rt.Run(ctx, runtime.Job{Version: version, Image: image, Prog: "pg_controldata", Args: []string{"-D", dir},
		Stdout: &out, Stderr: io.Discard, Paths: []string{dir}}); err != nil {
		return nil, err
	}
	return controlFields(out.Bytes()), nil
}

// preparedSettings lets the seed's server start on a copy that holds prepared
// transactions (two-phase commit in flight when it was taken): recovery needs as
// many of them as the cluster it was taken from allowed, which its control file
// says, whatever the copied configuration (or its absence, Debian's being in /etc)
// says.
func preparedSettings(fields map[string]string) map[string]string {
	n, err := strconv.Atoi(fields["max_prepared_xacts setting"])
	if err != nil || n <= 0 {
		return nil
	}
	return map[string]string{"max_prepared_transactions": strconv.Itoa(n)}
}

// rollbackPrepared rolls back the prepared transactions of a copy: they are
// uncommitted work, which no seed holds; left in place, each would hold its locks
// and its snapshot's horizon in every branch for good, and its rows (which a mask
// does not see) in every file.
func (s *server) rollbackPrepared(ctx context.Context, superuser string, progress func(string)) error {
	xacts, err := s.preparedXacts(ctx, superuser)
	if err != nil {
		return err
	}
	for _, x := range xacts {
		progress(fmt.Sprintf("rolling back the prepared transaction %q in %s", x.GID, x.DB))
		// ROLLBACK PREPARED runs in the transaction's database.
		if err := s.exec(ctx, superuser, x.DB, "ROLLBACK PREPARED "+quoteLiteral(x.GID)); err != nil {
			return fmt.Errorf("roll back prepared transaction %q: %w", x.GID, err)
		}
	}
	return nil
}

type preparedXact struct{ GID, DB string }

func (s *server) preparedXacts(ctx context.Context, superuser string) ([]preparedXact, error) {
	c, err := s.connect(ctx, superuser, "template1")
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	rows, err := c.Query(ctx, "SELECT gid, database::text FROM pg_prepared_xacts ORDER BY prepared")
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[preparedXact])
}

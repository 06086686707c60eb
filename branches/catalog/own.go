package catalog

import (
	"context"
	"errors"
	"fmt"
)

// ErrInUse is returned by Own when another server has the catalog.
var ErrInUse = errors.New("catalog is in use by another server")

// Own claims the catalog for this server until release is called: two servers on one
// catalog would each reconcile the other's branches as strays. On Postgres it is a
// session advisory lock held on a connection of its own; if that connection is lost
// (the catalog's server restarted) the claim is gone too, and it is checked again
// only at the next start. A SQLite catalog is a file of one state directory, whose
// own lock already keeps a second server out, so Own takes nothing there.
func (c *Catalog) Own(ctx context.Context) (release func(), err error) {
	if c.d.name() != "postgres" {
		return func() {}, nil
	}
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("claim the catalog: %w", err)
	}
	var got bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(hashtext('pgbranchproxy.catalog.owner'))`).Scan(&got); err != nil {
		conn.Close()
		return nil, fmt.Errorf("claim the catalog: %w", err)
	}
	if !got {
		conn.Close()
		holder := ""
		_ = c.db.QueryRowContext(ctx, `SELECT format(' (pid %s on %s, since %s)', a.pid, coalesce(host(a.client_addr), 'a local socket'), a.backend_start)
			FROM pg_locks l JOIN pg_stat_activity a USING (pid)
			WHERE l.locktype = 'advisory' AND l.granted AND l.objid = hashtext('pgbranchproxy.catalog.owner')::oid
			AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) LIMIT 1`).Scan(&holder)
		return nil, fmt.Errorf("%w: another pgbranchproxy serve holds it%s; a catalog serves one server until the multi-host roles exist", ErrInUse, holder)
	}
	return func() {
		_, _ = conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock(hashtext('pgbranchproxy.catalog.owner'))`)
		conn.Close()
	}, nil
}

package seed

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/pgbranchproxy/pgbranchproxy/branches/dbdiff"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
)

// DumpSchema runs pg_dump --schema-only (of major version, in image under a
// container runtime) on database db of the server listening on the unix socket file
// socket (".../.s.PGSQL.5432") and returns its normalized text.
func (b *Builder) DumpSchema(ctx context.Context, version, image, socket, user, db string) (string, error) {
	port := strings.TrimPrefix(filepath.Ext(socket), ".")
	if _, err := strconv.Atoi(port); err != nil {
		return "", fmt.Errorf("socket %s: no port", socket)
	}
	var out, stderr bytes.Buffer
	err := b.rt.Run(ctx, runtime.Job{Version: version, Image: image, Prog: "pg_dump",
		Args:   []string{"--schema-only", "--no-password", "-h", filepath.Dir(socket), "-p", port, "-U", user, "-d", db},
		Stdout: &out, Stderr: &stderr, Paths: []string{filepath.Dir(socket)}})
	if err != nil {
		return "", fmt.Errorf("pg_dump --schema-only %s: %w: %s", db, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return dbdiff.Normalize(out.Bytes()), nil
}

// snapshot records the schema and the tables of every non-template database, for
// branch diff to compare branches with.
func (b *Builder) snapshot(ctx context.Context, srv *server, req Request, version, superuser string, progress func(string)) (dbdiff.Snapshot, error) {
	c, err := srv.connect(ctx, superuser, "template1")
	if err != nil {
		return nil, err
	}
	rows, err := c.Query(ctx, "SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY datname")
	var dbs []string
	if err == nil {
		dbs, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	c.Close(context.Background())
	if err != nil {
		return nil, err
	}
	progress("recording schema and table sizes")
	socket := filepath.Join(srv.sockDir, ".s.PGSQL.5432")
	snap := dbdiff.Snapshot{}
	for _, db := range dbs {
		schema, err := b.DumpSchema(ctx, version, req.Image, socket, superuser, db)
		if err != nil {
			return nil, err
		}
		c, err := srv.connect(ctx, superuser, db)
		if err != nil {
			return nil, err
		}
		tables, err := dbdiff.ReadTables(ctx, c)
		c.Close(context.Background())
		if err != nil {
			return nil, fmt.Errorf("tables of %q: %w", db, err)
		}
		snap[db] = dbdiff.Database{Schema: schema, Tables: tables, Normalized: dbdiff.NormalizeVersion}
	}
	return snap, nil
}

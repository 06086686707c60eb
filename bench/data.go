package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// dataset is one pgbench data set and the plain cluster that holds it. The
// cluster generated the data; a copy of its stopped data directory is the source
// of the same name in the proxy, so the plain cluster and the proxy's branches
// serve the same bytes. Its name is also the database name and the source name.
type dataset struct {
	name    string
	scale   int
	dataDir string
	sockDir string
	plain   *pgServer // running plain cluster; nil while stopped
	seedDir string    // the proxy's settled seed of this source
	sizeMiB float64   // pg_database_size of the database
}

// makeDataset initdbs a cluster, creates database name, loads pgbench data at
// scale with server-side generation, freezes and analyzes it (as seeding does),
// and stops the cluster.
func makeDataset(ctx context.Context, e *env, name string, scale int) (*dataset, error) {
	base := filepath.Join(e.root, "plain-"+name)
	if err := os.Mkdir(base, 0o711); err != nil {
		return nil, err
	}
	d := &dataset{name: name, scale: scale, dataDir: filepath.Join(base, "data"), sockDir: filepath.Join(base, "sock")}
	if err := e.initCluster(ctx, d.dataDir); err != nil {
		return nil, err
	}
	if err := d.start(ctx, e); err != nil {
		return nil, err
	}
	if err := execSQL(ctx, d.plain.unixDSN("postgres"), "CREATE DATABASE "+name); err != nil {
		return nil, err
	}
	if err := e.runAsPG(ctx, "pgbench", "-i", "-q", "-I", "dtGp", "-s", strconv.Itoa(scale),
		"-h", d.sockDir, "-p", strconv.Itoa(d.plain.port), "-U", "postgres", name); err != nil {
		return nil, err
	}
	if err := execSQL(ctx, d.plain.unixDSN(name), "VACUUM (FREEZE, ANALYZE)", "CHECKPOINT"); err != nil {
		return nil, err
	}
	c, err := pgx.Connect(ctx, d.plain.unixDSN(name))
	if err != nil {
		return nil, err
	}
	var size int64
	err = c.QueryRow(ctx, "SELECT pg_database_size(current_database())").Scan(&size)
	c.Close(context.Background())
	if err != nil {
		return nil, err
	}
	d.sizeMiB = float64(size) / (1 << 20)
	return d, d.stop()
}

// start starts the plain cluster with a TCP listener on a free loopback port.
func (d *dataset) start(ctx context.Context, e *env) error {
	s, err := e.startPG(ctx, d.name, d.dataDir, d.sockDir, true, "postgres")
	if err != nil {
		return err
	}
	d.plain = s
	return nil
}

// stop stops the plain cluster.
func (d *dataset) stop() error {
	if d.plain == nil {
		return nil
	}
	err := d.plain.stop()
	d.plain = nil
	return err
}

// seed adds the stopped plain cluster as a source of the proxy and finds the
// seed's data directory.
func (d *dataset) seed(ctx context.Context, p *proxyServer) error {
	if _, err := p.cli(ctx, "source", "add", d.name, "--from-datadir", d.dataDir); err != nil {
		return err
	}
	dirs, _ := filepath.Glob(filepath.Join(p.state, "seeds", d.name, "*", "data"))
	if len(dirs) == 0 {
		return fmt.Errorf("source %s: no seed data directory under %s", d.name, filepath.Join(p.state, "seeds", d.name))
	}
	d.seedDir = dirs[len(dirs)-1]
	return nil
}

// execSQL runs statements one by one in a new connection to dsn.
func execSQL(ctx context.Context, dsn string, stmts ...string) error {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	for _, s := range stmts {
		if _, err := c.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

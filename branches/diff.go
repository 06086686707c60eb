package branches

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/dbdiff"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// DiffOptions say what a branch is compared with.
type DiffOptions struct {
	Source  string // "" when the branch name is in one source only
	Against string // "" or "seed": the seed generation the branch was made from; else a branch of the same source
	Data    bool   // compare tables' row counts and sizes too
}

// DiffResult is a branch compared with its seed or another branch.
type DiffResult struct {
	Branch  string             `json:"branch"`
	Against string             `json:"against"`
	Equal   bool               `json:"equal"`            // same schema (and, with Data, same row counts)
	Schema  string             `json:"schema"`           // unified diff of normalized pg_dump --schema-only; "" when equal
	Tables  []dbdiff.TableDiff `json:"tables,omitempty"` // with Data
}

// Diff compares a branch's schema (and with opts.Data its tables) with its seed,
// as recorded when the seed was settled, or with another branch's current state.
// Both branches are woken if stopped and held for the length of the comparison.
func (m *Manager) Diff(ctx context.Context, name string, opts DiffOptions) (DiffResult, error) {
	source, err := m.sourceOfBranch(opts.Source, name)
	if err != nil {
		return DiffResult{}, m.elsewhere(ctx, opts.Source, name, "diff", err)
	}
	res := DiffResult{Branch: name, Against: opts.Against}
	if against := opts.Against; against != "" && against != "seed" {
		// Before name is woken for nothing: a branch of another node cannot be
		// read here.
		m.mu.Lock()
		held := m.branches[key{source, against}] != nil
		m.mu.Unlock()
		if !held {
			return DiffResult{}, m.elsewhere(ctx, source, against, diffAgainst,
				fmt.Errorf("branch %q of source %q: %w", against, source, ErrNotFound))
		}
	}
	cur, upper, err := m.branchSnapshot(ctx, source, name, opts.Data)
	if err != nil {
		return DiffResult{}, err
	}
	var base dbdiff.Snapshot
	if opts.Against == "" || opts.Against == "seed" {
		res.Against = "seed"
		if base, err = m.seedSnapshotOf(source, name); err != nil {
			return DiffResult{}, err
		}
	} else {
		if _, err := m.sourceOfBranch(source, opts.Against); err != nil {
			return DiffResult{}, err
		}
		if base, _, err = m.branchSnapshot(ctx, source, opts.Against, opts.Data); err != nil {
			return DiffResult{}, err
		}
	}
	var parts []string
	for _, db := range dbdiff.DatabaseNames(base, cur) {
		curSchema := cur[db].Schema
		_, inCur := cur[db]
		if b, ok := base[db]; ok && inCur {
			curSchema = dbdiff.AsVersion(curSchema, b.Normalized) // a seed snapshot may be older
		}
		d, err := dbdiff.Unified(ctx, res.Against+"/"+db, name+"/"+db, base[db].Schema, curSchema)
		if err != nil {
			return DiffResult{}, err
		}
		if d != "" {
			parts = append(parts, d)
		}
	}
	res.Schema = strings.Join(parts, "")
	res.Equal = res.Schema == ""
	if opts.Data {
		res.Tables = dbdiff.CompareTables(base, cur)
		owned := ownedFiles(upper, cur)
		for i := range res.Tables {
			t := &res.Tables[i]
			t.Owned = owned[t.Database+"\x00"+t.Table]
			if t.Status != "same" {
				res.Equal = false
			}
		}
	}
	return res, nil
}

// seedSnapshotOf reads the snapshot recorded with the seed generation of a branch.
func (m *Manager) seedSnapshotOf(source, name string) (dbdiff.Snapshot, error) {
	m.mu.Lock()
	b := m.branches[key{source, name}]
	var id int64
	if b != nil {
		id = b.rec.SeedID
	}
	m.mu.Unlock()
	if b == nil {
		return nil, fmt.Errorf("branch %q: %w", name, ErrNotFound)
	}
	sd, err := m.seedByID(id)
	if err != nil {
		return nil, err
	}
	return readSnapshot(m.seedLayer(sd))
}

// branchSnapshot wakes the branch (if stopped), holds it, and dumps its schema, and
// with data its tables, from every non-template database. It returns the branch's
// upper layer too.
func (m *Manager) branchSnapshot(ctx context.Context, source, name string, data bool) (dbdiff.Snapshot, string, error) {
	l, err := m.acquireExisting(ctx, router.Route{Database: "postgres", Branch: name, Options: router.Options{Source: source}})
	if err != nil {
		return nil, "", err
	}
	defer l.Release()
	m.mu.Lock()
	seedID, id := l.b.rec.SeedID, l.b.rec.ID
	m.mu.Unlock()
	sd, err := m.seedByID(seedID)
	if err != nil {
		return nil, "", err
	}
	c, err := branchConn(ctx, l, sd, "template1")
	if err != nil {
		return nil, "", err
	}
	rows, err := c.Query(ctx, "SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY datname")
	var dbs []string
	if err == nil {
		dbs, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	c.Close(context.WithoutCancel(ctx))
	if err != nil {
		return nil, "", fmt.Errorf("list databases of %q: %w", name, err)
	}
	image := m.sourceImage(ctx, source)
	snap := dbdiff.Snapshot{}
	for _, db := range dbs {
		schema, err := m.cfg.Builder.DumpSchema(ctx, sd.PGVersion, image, l.socket, sd.Superuser, db)
		if err != nil {
			return nil, "", err
		}
		d := dbdiff.Database{Schema: schema, Normalized: dbdiff.NormalizeVersion}
		if data {
			c, err := branchConn(ctx, l, sd, db)
			if err != nil {
				return nil, "", err
			}
			d.Tables, err = dbdiff.ReadTables(ctx, c)
			c.Close(context.WithoutCancel(ctx))
			if err != nil {
				return nil, "", fmt.Errorf("tables of %q in %q: %w", db, name, err)
			}
		}
		snap[db] = d
	}
	return snap, m.layoutOf(id).upper, nil
}

// branchConn connects to database db of a leased branch as its seed's superuser.
func branchConn(ctx context.Context, l *Lease, sd catalog.Seed, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Database = "/pgbranch", 5432, sd.Superuser, db
	cfg.TLSConfig, cfg.Fallbacks = nil, nil
	cfg.ConnectTimeout = 10 * time.Second
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) { return l.Dial(ctx) }
	cfg.RuntimeParams = map[string]string{"application_name": "pgbranchproxy-diff"}
	return pgx.ConnectConfig(ctx, cfg)
}

// ownedFiles sums, per database and table, the allocated bytes of the table's files
// (every segment and fork) in the branch's upper layer: what the branch wrote or
// copied up of that table.
func ownedFiles(upper string, snap dbdiff.Snapshot) map[string]int64 {
	out := map[string]int64{}
	for db, d := range snap {
		for _, t := range d.Tables {
			var n int64
			for _, f := range t.Files {
				base := filepath.Join(upper, f)
				for _, pat := range []string{base, base + ".*", base + "_*"} {
					matches, _ := filepath.Glob(pat)
					for _, p := range matches {
						if st, err := os.Stat(p); err == nil {
							n += allocatedBytes(st)
						}
					}
				}
			}
			out[db+"\x00"+t.Name] = n
		}
	}
	return out
}

// allocatedBytes is the space a file takes on disk (holes excluded).
func allocatedBytes(st os.FileInfo) int64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Blocks * 512
	}
	return st.Size()
}

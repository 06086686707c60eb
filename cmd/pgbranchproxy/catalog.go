package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/spf13/cobra"
)

func newCatalog(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "catalog", Short: "Move a server's catalog between SQLite and Postgres"}
	cmd.AddCommand(newCatalogMigrate(g))
	return cmd
}

func newCatalogMigrate(g *globalFlags) *cobra.Command {
	var from, to string
	var force bool
	cmd := &cobra.Command{
		Use:   "migrate --to DST [--from SRC] [--force]",
		Short: "Copy every row of one catalog into another, e.g. from the state dir's SQLite file to Postgres",
		Long: "Copy every row of every table of the catalog SRC into DST, in one transaction on DST,\n" +
			"then serve with --catalog DST. SRC and DST are postgres:// URLs or SQLite files;\n" +
			"--from defaults to <state-dir>/catalog.db. A server running on either catalog, or on\n" +
			"the state directory SRC belongs to, is refused: stop it first, since rows it writes\n" +
			"later are not copied. The state directory's id goes with the rows, so the state\n" +
			"directory serves with DST afterwards. A DST that has rows is refused unless --force,\n" +
			"which deletes them (in the same transaction).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m := migration{from: from, to: to, force: force, stateDir: g.stateDir, ownDir: from == ""}
			if m.from == "" {
				m.from = filepath.Join(g.stateDir, "catalog.db")
			}
			return m.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the catalog to copy (default: <state-dir>/catalog.db)")
	cmd.Flags().StringVar(&to, "to", "", "the catalog to copy into: a postgres:// URL or a SQLite file")
	cmd.Flags().BoolVar(&force, "force", false, "delete the rows DST already has")
	cmd.MarkFlagRequired("to")
	return cmd
}

// migration is one run of catalog migrate.
type migration struct {
	from, to string
	force    bool
	stateDir string // --state-dir
	ownDir   bool   // from is the state directory's own catalog (--from not given)
	release  []func()
}

func (m *migration) run(ctx context.Context, out io.Writer) error {
	defer func() {
		for i := len(m.release) - 1; i >= 0; i-- {
			m.release[i]()
		}
	}()
	if sameCatalog(m.from, m.to) {
		return usageErrorf("--from and --to are the same catalog")
	}
	if !catalog.IsPostgres(m.from) {
		// Open would create a missing file: an empty source is a mistake, not a copy.
		if _, err := os.Stat(strings.TrimPrefix(m.from, "sqlite://")); err != nil {
			return fmt.Errorf("--from: %w", err)
		}
	}
	src, err := m.open(ctx, "--from", m.from)
	if err != nil {
		return err
	}
	dst, err := m.open(ctx, "--to", m.to)
	if err != nil {
		return err
	}
	stateDir, err := m.boundStateDir(ctx, src)
	if err != nil {
		return err
	}
	n, err := catalog.Copy(ctx, src, dst, m.force)
	if errors.Is(err, catalog.ErrNotEmpty) {
		return fmt.Errorf("%w; pass --force to replace its rows", err)
	}
	if err != nil {
		return fmt.Errorf("copy %s to %s: %w", catalog.Redact(m.from), catalog.Redact(m.to), err)
	}
	if stateDir != "" {
		if err := bindMigrated(ctx, stateDir, src, dst); err != nil {
			return err
		}
	}
	var total int64
	for _, c := range n {
		total += c
	}
	fmt.Fprintf(out, "copied %d rows from %s (%s) to %s (%s): %d sources, %d seeds, %d branches, %d transitions, %d server settings, %d tokens, %d audit entries\n",
		total, catalog.Redact(m.from), src.Backend(), catalog.Redact(m.to), dst.Backend(),
		n["sources"], n["seeds"], n["branches"], n["transitions"], n["server_settings"], n["tokens"], n["audit"])
	return nil
}

// open opens one end of the migration and takes what serve takes on it: the
// catalog itself (a Postgres catalog's advisory lock) and, for a SQLite file in a
// state directory, that directory's lock. A server holding either is refused.
func (m *migration) open(ctx context.Context, flag, dsn string) (*catalog.Catalog, error) {
	if !catalog.IsPostgres(dsn) {
		dir := filepath.Dir(strings.TrimPrefix(dsn, "sqlite://"))
		if _, err := os.Stat(filepath.Join(dir, "serve.lock")); err == nil {
			if err := m.lockStateDir(dir); err != nil {
				return nil, fmt.Errorf("%s: %w", flag, err)
			}
		}
	}
	c, err := catalog.Open(dsn)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	m.release = append(m.release, func() { c.Close() })
	disown, err := c.Own(ctx)
	if errors.Is(err, catalog.ErrInUse) {
		return nil, fmt.Errorf("%s: %w: stop it first, or the rows it writes after the copy are lost", flag, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	m.release = append(m.release, disown)
	return c, nil
}

// lockStateDir takes a state directory's serve lock until the migration ends.
func (m *migration) lockStateDir(dir string) error {
	lock, err := branches.LockStateDir(dir)
	if errors.Is(err, branches.ErrStateDirInUse) {
		return fmt.Errorf("a server is running on %s: stop it first, or the rows it writes after the copy are lost (%w)", dir, err)
	}
	if err != nil {
		return err
	}
	m.release = append(m.release, func() { lock.Close() })
	return nil
}

// boundStateDir returns --state-dir, locked, if src is its catalog (the default
// --from, or a catalog bound to it), and "" if src belongs to no state directory
// known here. A default --from bound to another state directory is refused.
func (m *migration) boundStateDir(ctx context.Context, src *catalog.Catalog) (string, error) {
	fileID, err := branches.ReadStateID(m.stateDir)
	if err != nil {
		return "", err
	}
	srcID, err := src.StateID(ctx)
	if err != nil {
		return "", fmt.Errorf("--from: %w", err)
	}
	switch {
	case strings.HasPrefix(srcID, catalog.RetiredPrefix):
		return "", fmt.Errorf("%w: %s was migrated to another catalog already, and its rows are out of date; "+
			"migrate from the catalog the state directory serves with now", branches.ErrNotBound, catalog.Redact(m.from))
	case m.ownDir && fileID != "" && srcID != "" && fileID != srcID:
		return "", fmt.Errorf("%w: %s has id %s, %s belongs to the state directory of id %s",
			branches.ErrNotBound, m.stateDir, fileID, catalog.Redact(m.from), srcID)
	case !m.ownDir && (fileID == "" || fileID != srcID):
		return "", nil
	}
	if !m.locked(m.stateDir) {
		if err := m.lockStateDir(m.stateDir); err != nil {
			return "", err
		}
	}
	return m.stateDir, nil
}

// locked reports whether open took dir's lock already (a SQLite end in it).
func (m *migration) locked(dir string) bool {
	for _, dsn := range []string{m.from, m.to} {
		if !catalog.IsPostgres(dsn) && sameDir(filepath.Dir(strings.TrimPrefix(dsn, "sqlite://")), dir) {
			if _, err := os.Stat(filepath.Join(dir, "serve.lock")); err == nil {
				return true
			}
		}
	}
	return false
}

func sameDir(a, b string) bool {
	pa, errA := filepath.Abs(a)
	pb, errB := filepath.Abs(b)
	return errA == nil && errB == nil && pa == pb
}

// bindMigrated leaves the state directory bound to dst alone: dst gets the state
// directory's id (carried by Copy, or new for a pair from before the id), and src
// is retired, so that a server started on src again is refused rather than
// reconciling the state directory against rows that no longer describe it.
func bindMigrated(ctx context.Context, stateDir string, src, dst *catalog.Catalog) error {
	id, err := dst.StateID(ctx)
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	id = strings.TrimPrefix(id, catalog.RetiredPrefix) // migrating back to a retired catalog's copy
	if id == "" {
		if id, err = branches.ReadStateID(stateDir); err != nil {
			return err
		}
		if id == "" {
			id = branches.NewStateID()
		}
	}
	if err := dst.SetStateID(ctx, id); err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	if err := branches.WriteStateID(stateDir, id); err != nil {
		return err
	}
	if err := src.Retire(ctx, id); err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	return nil
}

// sameCatalog reports whether two catalog locations are obviously one catalog.
func sameCatalog(a, b string) bool {
	if catalog.IsPostgres(a) || catalog.IsPostgres(b) {
		return a == b
	}
	pa, errA := filepath.Abs(strings.TrimPrefix(a, "sqlite://"))
	pb, errB := filepath.Abs(strings.TrimPrefix(b, "sqlite://"))
	return errA == nil && errB == nil && pa == pb
}

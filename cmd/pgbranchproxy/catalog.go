package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

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
			"--from defaults to <state-dir>/catalog.db, and then a server running on the state\n" +
			"dir is refused: stop it first, since rows it writes later are not copied.\n" +
			"A DST that has rows is refused unless --force, which deletes them (in the\n" +
			"same transaction).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" {
				from = filepath.Join(g.stateDir, "catalog.db")
				// A running server on the state dir keeps writing to this file.
				if serverRunning(g.stateDir) {
					return fmt.Errorf("a server is running on %s: stop it first, or the rows it writes after the copy are lost", g.stateDir)
				}
			}
			return catalogMigrate(cmd.Context(), from, to, force, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the catalog to copy (default: <state-dir>/catalog.db)")
	cmd.Flags().StringVar(&to, "to", "", "the catalog to copy into: a postgres:// URL or a SQLite file")
	cmd.Flags().BoolVar(&force, "force", false, "delete the rows DST already has")
	cmd.MarkFlagRequired("to")
	return cmd
}

func catalogMigrate(ctx context.Context, from, to string, force bool, out io.Writer) error {
	if sameCatalog(from, to) {
		return usageErrorf("--from and --to are the same catalog")
	}
	if !catalog.IsPostgres(from) {
		// Open would create a missing file: an empty source is a mistake, not a copy.
		if _, err := os.Stat(strings.TrimPrefix(from, "sqlite://")); err != nil {
			return fmt.Errorf("--from: %w", err)
		}
	}
	src, err := catalog.Open(from)
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	defer src.Close()
	dst, err := catalog.Open(to)
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	defer dst.Close()
	n, err := catalog.Copy(ctx, src, dst, force)
	if errors.Is(err, catalog.ErrNotEmpty) {
		return fmt.Errorf("%w; pass --force to replace its rows", err)
	}
	if err != nil {
		return fmt.Errorf("copy %s to %s: %w", catalog.Redact(from), catalog.Redact(to), err)
	}
	var total int64
	for _, c := range n {
		total += c
	}
	fmt.Fprintf(out, "copied %d rows from %s (%s) to %s (%s): %d sources, %d seeds, %d branches, %d transitions, %d server settings, %d tokens, %d audit entries\n",
		total, catalog.Redact(from), src.Backend(), catalog.Redact(to), dst.Backend(),
		n["sources"], n["seeds"], n["branches"], n["transitions"], n["server_settings"], n["tokens"], n["audit"])
	return nil
}

// serverRunning reports whether a server answers on the state dir's admin socket.
func serverRunning(stateDir string) bool {
	c, err := net.DialTimeout("unix", filepath.Join(stateDir, "admin.sock"), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
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

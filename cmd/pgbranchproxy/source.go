package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/branches/seed"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"github.com/spf13/cobra"
)

func newSource(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "source", Short: "Manage sources (the seeded databases branches are made from)"}
	cmd.AddCommand(newSourceAdd(g), newSourceLs(g), newSourceRm(g), newSourceRefresh(g), newSourceSet(g))
	return cmd
}

func newSourceAdd(g *globalFlags) *cobra.Command {
	var req branches.SourceRequest
	var empty bool
	var warm int
	var maskFile string
	cmd := &cobra.Command{
		Use:   "add NAME (--from-sql FILE [--database DB] | --from-url URL | --from-datadir PATH | --from-branch SOURCE/BRANCH | --from-dump FILE|DIR | --empty) [--mask FILE.sql]",
		Short: "Add a source and build its settled seed; returns when it is ready",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Name = args[0]
			n := 0
			for _, set := range []bool{req.SQLFile != "", req.URL != "", req.DataDir != "", req.Branch != "", req.DumpPath != "", empty} {
				if set {
					n++
				}
			}
			if n != 1 {
				return usageErrorf("give exactly one of --from-sql, --from-url, --from-datadir, --from-branch, --from-dump or --empty")
			}
			if !router.ValidSourceName(req.Name) {
				return usageErrorf("source name %q: %s", req.Name, router.SourceNameHint())
			}
			if err := checkBuildFlags(cmd, req); err != nil {
				return err
			}
			if err := readMask(maskFile, &req); err != nil {
				return err
			}
			switch {
			case req.SQLFile != "":
				req.Kind = seed.KindSQL
				abs, err := filepath.Abs(req.SQLFile)
				if err != nil {
					return err
				}
				req.SQLFile = abs
			case req.URL != "":
				req.Kind = seed.KindURL
			case req.Branch != "":
				req.Kind = branches.KindBranch
				if err := branchExists(cmd.Context(), newClient(g), req.Branch); err != nil {
					return err
				}
			case req.DataDir != "":
				req.Kind = seed.KindDataDir
				abs, err := filepath.Abs(req.DataDir)
				if err != nil {
					return err
				}
				req.DataDir = abs
			case req.DumpPath != "":
				req.Kind = seed.KindDump
				abs, err := filepath.Abs(req.DumpPath)
				if err != nil {
					return err
				}
				req.DumpPath = abs
			default:
				req.Kind = seed.KindEmpty
			}
			if cmd.Flags().Changed("warm") {
				req.Warm = &warm
			}
			return streamSeed(cmd, g, "/v1/sources", req)
		},
	}
	cmd.Flags().StringVar(&req.SQLFile, "from-sql", "", "initdb a cluster and run this SQL file (ON_ERROR_STOP) in --database")
	cmd.Flags().StringVar(&req.Database, "database", "", "database the SQL file runs in (default: the source name)")
	cmd.Flags().StringVar(&req.URL, "from-url", "", "pg_basebackup from this server (the role needs REPLICATION)")
	cmd.Flags().StringVar(&req.DataDir, "from-datadir", "", "copy this stopped cluster's data directory")
	cmd.Flags().StringVar(&req.Branch, "from-branch", "", "copy this running branch online (SOURCE/BRANCH), e.g. a migrated schema")
	cmd.Flags().BoolVar(&empty, "empty", false, "an empty cluster (initdb)")
	addSourceServerFlags(cmd.Flags(), &req.Server)
	cmd.Flags().IntVar(&warm, "warm", 0, "branches of its newest seed to keep created and running for new names to claim (default: serve's --warm)")
	addBuildFlags(cmd, &req, &maskFile)
	return cmd
}

func newSourceLs(g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List sources",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var out []branches.SourceInfo
			if err := newClient(g).call(cmd.Context(), http.MethodGet, "/v1/sources", nil, &out); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(os.Stdout).Encode(out)
			}
			return writeSourceTable(os.Stdout, out)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// writeSourceTable writes source ls's table: on a node of several, the nodes that
// hold each seed; under a container runtime, the image of each source and the
// limits its branches' servers get unless they set their own.
func writeSourceTable(w io.Writer, out []branches.SourceInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	nodes := slices.ContainsFunc(out, func(s branches.SourceInfo) bool { return len(s.Nodes) > 0 })
	views := make([]branches.ServerView, len(out))
	for i, s := range out {
		views[i] = s.ServerView
	}
	image, limits := serverColumns(views)
	head := "NAME\tKIND\tGENERATION\tPG\tDATABASES\tBRANCHES"
	if nodes {
		head += "\tSEED ON NODES"
	}
	fmt.Fprintln(tw, head+serverHeader(image, limits))
	for _, s := range out {
		line := fmt.Sprintf("%s\t%s\t%d\t%s\t%s\t%d", s.Name, s.Kind, s.Generation, s.PGVersion, strings.Join(s.Databases, ","), s.Branches)
		if nodes {
			line += "\t" + orDash(strings.Join(s.Nodes, ","))
		}
		fmt.Fprintln(tw, line+serverCells(s.ServerView, image, limits))
	}
	return tw.Flush()
}

func newSourceRm(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a source that has no branches",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return newClient(g).call(cmd.Context(), http.MethodDelete, "/v1/sources/"+args[0], nil, nil)
		},
	}
}

func newSourceRefresh(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "refresh NAME",
		Short: "Build a new seed generation from the source's origin; existing branches keep theirs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return streamSeed(cmd, g, "/v1/sources/"+url.PathEscape(args[0])+"/refresh", struct{}{})
		},
	}
}

// streamSeed posts a seed build and prints its progress, then a summary.
func streamSeed(cmd *cobra.Command, g *globalFlags, path string, body any) error {
	start := time.Now()
	p, err := newClient(g).stream(cmd.Context(), path, body, func(line string) {
		fmt.Fprintf(os.Stderr, "  %6.1fs  %s\n", time.Since(start).Seconds(), line)
	})
	if err != nil {
		return err
	}
	s := p.Source
	fmt.Printf("source %s ready: generation %d, PostgreSQL %s, databases %s, seeded in %s\n",
		s.Name, s.Generation, s.PGVersion, strings.Join(s.Databases, ", "), time.Since(start).Round(time.Millisecond))
	return nil
}

// branchExists checks "SOURCE/BRANCH" before a seed build is started from it, so
// that a missing branch gets the not-found exit code.
func branchExists(ctx context.Context, c *client, spec string) error {
	source, name, _ := strings.Cut(spec, "/")
	var list []branches.Info
	if err := c.call(ctx, http.MethodGet, "/v1/branches", nil, &list); err != nil {
		return err
	}
	for _, b := range list {
		if b.Source == source && b.Name == name {
			return nil
		}
	}
	return &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("branch %q of source %q not found", name, source)}
}

package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"github.com/spf13/cobra"
)

func newBranch(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "branch", Short: "Manage branches"}
	cmd.AddCommand(newBranchLs(g), newBranchCreate(g), newBranchURL(g),
		branchAction(g, "reset", "Throw a branch's writes away, back to its base", http.MethodPost, "/reset"),
		branchAction(g, "stop", "Stop a branch's server, keeping its data", http.MethodPost, "/stop"),
		newBranchDestroy(g),
		newBranchSet(g), newBranchDiff(g))
	return cmd
}

func newBranchLs(g *globalFlags) *cobra.Command {
	var asJSON, usage, all bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List branches",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var out []branches.Info
			path := "/v1/branches"
			if all {
				path += "?all=true"
			}
			if err := newClient(g).call(cmd.Context(), http.MethodGet, path, nil, &out); err != nil {
				return err
			}
			if asJSON {
				return printJSON(out)
			}
			if err := writeBranchTable(os.Stdout, out, usage); err != nil {
				return err
			}
			writeBranchErrors(os.Stderr, out)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&usage, "usage", false, "show the MiB each branch owns")
	cmd.Flags().BoolVar(&all, "all", false, "list warm pool members too (state pooled)")
	return cmd
}

// writeBranchErrors says, under branch ls's table, why a branch is lost or fenced,
// and why the last start of a stopped one failed (a missing image, a limit the
// Engine refused): what a client refused with "the branch's server did not start"
// is told to look for here.
func writeBranchErrors(w io.Writer, out []branches.Info) {
	for _, b := range out {
		switch {
		case b.Error == "":
		case b.State == "lost" || b.State == "fenced":
			fmt.Fprintf(w, "%s/%s is %s: %s\n", b.Source, b.Name, b.State, b.Error)
		default:
			fmt.Fprintf(w, "%s/%s: its last start failed: %s\n", b.Source, b.Name, b.Error)
		}
	}
}

// writeBranchTable writes branch ls's table: with usage, each branch's owned
// MiB; under a container runtime, its server's image and limits.
func writeBranchTable(w io.Writer, out []branches.Info, usage bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	views := make([]branches.ServerView, len(out))
	for i, b := range out {
		views[i] = b.ServerView
	}
	image, limits := serverColumns(views)
	hdr := "SOURCE\tNAME\tSTATE\tCOW\tSESSIONS\tLAST USED"
	if usage {
		hdr += "\tOWNED MiB"
	}
	fmt.Fprintln(tw, hdr+serverHeader(image, limits))
	for _, b := range out {
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%s", b.Source, b.Name, b.State, b.CowMode, b.Sessions, ago(b.LastUsedAt))
		if usage {
			line += fmt.Sprintf("\t%.1f", float64(b.OwnedBytes)/(1<<20))
		}
		fmt.Fprintln(tw, line+serverCells(b.ServerView, image, limits))
	}
	return tw.Flush()
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}

func newBranchSet(g *globalFlags) *cobra.Command {
	var source string
	var ttl time.Duration
	var quota int64
	var ephemeral bool
	var limits runtime.Limits
	cmd := &cobra.Command{
		Use:   "set NAME [--ttl DUR] [--quota SIZE] [--ephemeral=true|false] [--branch-memory SIZE] [--branch-cpus N] [--branch-pids N] [--source S]",
		Short: "Change a branch's TTL, quota, ephemeral mark or server limits (limits apply from its next start)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkExistingName(args[0]); err != nil {
				return err
			}
			var s branches.Settings
			if cmd.Flags().Changed("ttl") {
				t := branches.TTL(ttl)
				s.TTL = &t
			}
			if cmd.Flags().Changed("quota") {
				s.Quota = &quota
			}
			if cmd.Flags().Changed("ephemeral") {
				s.Ephemeral = &ephemeral
			}
			if cmd.Flags().Changed("branch-memory") {
				s.MemoryBytes = &limits.MemoryBytes
			}
			if cmd.Flags().Changed("branch-cpus") {
				s.CPUs = &limits.CPUs
			}
			if cmd.Flags().Changed("branch-pids") {
				s.PIDs = &limits.PIDs
			}
			if s.TTL == nil && s.Quota == nil && s.Ephemeral == nil && s.ServerLimits == (branches.ServerLimits{}) {
				return usageErrorf("give --ttl, --quota, --ephemeral, --branch-memory, --branch-cpus or --branch-pids")
			}
			path := "/v1/branches/" + url.PathEscape(args[0])
			if source != "" {
				path += "?source=" + url.QueryEscape(source)
			}
			return newClient(g).call(cmd.Context(), http.MethodPatch, path, s, nil)
		},
	}
	cmd.Flags().StringVar(&source, "source", "", "source of the branch (when the name exists in several)")
	cmd.Flags().Var(durationFlag{p: &ttl}, "ttl", "destroy after this long without a session (90m, 12h, 7d); 0: the server's default")
	cmd.Flags().Var(sizeFlag{&quota}, "quota", "bytes the branch may own, e.g. 2GB; 0: the server's default")
	cmd.Flags().BoolVar(&ephemeral, "ephemeral", false, "true: destroy the branch when its last session ends (at once if it has none open and has had one since serve started or was claimed from the pool); false: keep it")
	addLimitFlags(cmd.Flags(), &limits)
	markCommandLineOnly(cmd.Flags(), "ttl", "quota", "ephemeral", "branch-memory", "branch-cpus", "branch-pids")
	return cmd
}

func branchAction(g *globalFlags, verb, short, method, suffix string) *cobra.Command {
	var source string
	var force bool
	cmd := &cobra.Command{
		Use:   verb + " NAME [--source S] [--force]",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkExistingName(args[0]); err != nil {
				return err
			}
			path := "/v1/branches/" + url.PathEscape(args[0]) + suffix + branchOpQuery(source, force)
			return forceHint(newClient(g).call(cmd.Context(), method, path, nil, nil), force)
		},
	}
	cmd.Flags().StringVar(&source, "source", "", "source of the branch (when the name exists in several)")
	cmd.Flags().BoolVar(&force, "force", false, forceUsage)
	return cmd
}

// forceUsage describes --force of branch reset, stop and destroy.
const forceUsage = "end the branch's open sessions (each client is told 57P01, as after pg_terminate_backend) rather than refuse while it has some"

// forceHint adds to a refusal for the branch's open sessions that --force ends them.
func forceHint(err error, force bool) error {
	if err != nil && !force && isStatus(err, http.StatusConflict) && strings.Contains(err.Error(), "open sessions") {
		return fmt.Errorf("%w; --force ends them", err)
	}
	return err
}

// branchOpQuery is the query of a reset, stop or destroy request.
func branchOpQuery(source string, force bool) string {
	q := url.Values{}
	if source != "" {
		q.Set("source", source)
	}
	if force {
		q.Set("force", "true")
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

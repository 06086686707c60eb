package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"text/tabwriter"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"github.com/spf13/cobra"
)

// Exit statuses of branch diff, as diff(1) has them.
const (
	diffSame      = 0
	diffDifferent = 1
	diffTrouble   = 2
)

func newBranchDiff(g *globalFlags) *cobra.Command {
	var source, against string
	var data, asJSON bool
	cmd := &cobra.Command{
		Use:   "diff NAME [--against seed|BRANCH] [--data] [--source S] [--json]",
		Short: "Show how a branch's schema (and with --data its tables) differs from its seed or another branch; exit 0 same, 1 different, 2 trouble",
		Args:  cobra.ExactArgs(1),
		Run: func(cmd *cobra.Command, args []string) {
			for _, name := range []string{args[0], against} {
				if name != "" && name != "seed" && !router.ValidBranchName(name) {
					fmt.Fprintf(os.Stderr, "pgbranchproxy: invalid branch name %q: %s\n", name, router.BranchNameHint)
					os.Exit(diffTrouble)
				}
			}
			q := url.Values{}
			for k, v := range map[string]string{"source": source, "against": against} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if data {
				q.Set("data", "1")
			}
			var res branches.DiffResult
			path := "/v1/branches/" + url.PathEscape(args[0]) + "/diff?" + q.Encode()
			if err := newClient(g).call(cmd.Context(), http.MethodGet, path, nil, &res); err != nil {
				fmt.Fprintln(os.Stderr, "pgbranchproxy:", err)
				os.Exit(diffTrouble)
			}
			if asJSON {
				json.NewEncoder(os.Stdout).Encode(res)
			} else {
				fmt.Print(res.Schema)
				if data {
					printTableDiff(res)
				}
			}
			if !res.Equal {
				os.Exit(diffDifferent)
			}
			os.Exit(diffSame)
		},
	}
	cmd.Flags().StringVar(&source, "source", "", "source of the branch (when the name exists in several)")
	cmd.Flags().StringVar(&against, "against", "seed", "compare with the seed the branch was made from, or with this branch's current state")
	cmd.Flags().BoolVar(&data, "data", false, "compare every table's row count (and show sizes and the bytes the branch owns of it)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printTableDiff prints every table of both sides, with its status.
func printTableDiff(res branches.DiffResult) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "DATABASE\tTABLE\tSTATUS\tROWS %s\tROWS\tBYTES %s\tBYTES\tOWNED\n", res.Against, res.Against)
	for _, t := range res.Tables {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", t.Database, t.Table, t.Status, t.BaseRows, t.Rows, t.BaseBytes, t.Bytes, t.Owned)
	}
	tw.Flush()
}

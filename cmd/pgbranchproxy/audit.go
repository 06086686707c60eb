package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/spf13/cobra"
)

func newAudit(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Read the log of admin actions"}
	cmd.AddCommand(newAuditLs(g))
	return cmd
}

func newAuditLs(g *globalFlags) *cobra.Command {
	var since string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls [--since DURATION|TIME] [--json]",
		Short: "List admin actions, oldest first: when, who (a token's name, or local), what, on what, and how it ended",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := admin.ParseSince(since, time.Now()); err != nil {
				return usageErrorf("--%v", err)
			}
			path := "/v1/audit"
			if since != "" {
				path += "?since=" + url.QueryEscape(since)
			}
			var out []admin.AuditEntry
			if err := newClient(g).call(cmd.Context(), http.MethodGet, path, nil, &out); err != nil {
				return err
			}
			if asJSON {
				return printJSON(out)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tACTOR\tACTION\tTARGET\tRESULT")
			for _, e := range out {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.At.Local().Format(time.RFC3339), printable(e.Actor), printable(e.Action),
					printable(cmpOr(e.Target, "-")), printable(e.Result))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "only entries from this long ago (24h, 7d), since this date (2026-11-30) or since this time (2026-11-30T17:00:00Z)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printable quotes s when it holds a control character (a line break, a terminal
// escape): a request's name or body, logged as it came, must not start a line of
// its own or drive the terminal.
func printable(s string) string {
	if strings.ContainsFunc(s, unicode.IsControl) {
		return strconv.Quote(s)
	}
	return s
}

// printableLines is printable for an error of several lines (a program's output
// quoted in it): line breaks and tabs stay, other control characters (a terminal
// escape, a carriage return) become ?.
func printableLines(s string) string {
	return strings.Map(func(r rune) rune {
		if r != '\n' && r != '\t' && unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}

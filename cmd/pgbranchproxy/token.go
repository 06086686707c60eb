package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"text/tabwriter"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/spf13/cobra"
)

func newToken(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Manage the admin API's bearer tokens (for --admin-listen)"}
	cmd.AddCommand(newTokenCreate(g), newTokenLs(g), newTokenRm(g))
	return cmd
}

func newTokenCreate(g *globalFlags) *cobra.Command {
	var req admin.NewToken
	cmd := &cobra.Command{
		Use:   "create NAME --role admin|ci|read [--prefix PREFIX]",
		Short: "Make a token and print its secret, which is shown only this once",
		Long: "Make a token and print its secret, which is shown only this once.\n" +
			"admin may do everything; ci may create, reset, destroy and read the branches\n" +
			"whose names start with --prefix, and nothing else; read may read lists, info,\n" +
			"metrics and the audit log.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Name = args[0]
			if err := req.Validate(); err != nil {
				return usageError{err}
			}
			var out admin.CreatedToken
			if err := newClient(g).call(cmd.Context(), http.MethodPost, "/v1/tokens", req, &out); err != nil {
				return err
			}
			fmt.Println(out.Token)
			return nil
		},
	}
	cmd.Flags().StringVar(&req.Role, "role", "", "admin, ci or read")
	cmd.Flags().StringVar(&req.Prefix, "prefix", "", "for role ci: the start of the branch names it may act on, e.g. pr-")
	cmd.MarkFlagRequired("role")
	return cmd
}

func newTokenLs(g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var out []admin.TokenInfo
			if err := newClient(g).call(cmd.Context(), http.MethodGet, "/v1/tokens", nil, &out); err != nil {
				return err
			}
			if asJSON {
				return printJSON(out)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tROLE\tPREFIX\tCREATED")
			for _, t := range out {
				created := ago(t.CreatedAt)
				if t.Flag {
					created = "--admin-token"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Role, cmpOr(t.Prefix, "-"), created)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newTokenRm(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Revoke a token; requests with it are refused from now on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return newClient(g).call(cmd.Context(), http.MethodDelete, "/v1/tokens/"+url.PathEscape(args[0]), nil, nil)
		},
	}
}

package main

import (
	"net/http"
	"net/url"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/spf13/cobra"
)

func newSourceSet(g *globalFlags) *cobra.Command {
	var warm int
	cmd := &cobra.Command{
		Use:   "set NAME --warm N",
		Short: "Change a source's settings: how many pooled branches it keeps (-1: serve's --warm)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("warm") {
				return usageErrorf("nothing to set: give --warm")
			}
			return newClient(g).call(cmd.Context(), http.MethodPatch, "/v1/sources/"+url.PathEscape(args[0]), admin.SetSource{Warm: &warm}, nil)
		},
	}
	cmd.Flags().IntVar(&warm, "warm", 0, "pooled branches to keep; -1 for serve's --warm")
	return cmd
}

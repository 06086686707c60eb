package main

import (
	"encoding/json"
	"net/http"
	"os"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/spf13/cobra"
)

func newInfo(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "Show how the running server runs branches (copy-up mode, lazyrw)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var info branches.ServerInfo
			if err := newClient(g).call(cmd.Context(), http.MethodGet, "/v1/info", nil, &info); err != nil {
				return err
			}
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(info)
		},
	}
}

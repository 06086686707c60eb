package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"text/tabwriter"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/spf13/cobra"
)

func newNode(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "node", Short: "Show the nodes registered in the catalog"}
	cmd.AddCommand(newNodeLs(g), newNodeDrain(g, true), newNodeDrain(g, false))
	return cmd
}

// newNodeDrain is node drain (draining) or node resume.
func newNodeDrain(g *globalFlags, draining bool) *cobra.Command {
	use, short, verb := "resume [ID]", "Let a drained node take new branches again", "resume"
	if draining {
		use, short, verb = "drain [ID]", "Place no new branch on a node (default: this server's); its branches go on serving", "drain"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := newClient(g)
			id := ""
			if len(args) == 1 {
				id = args[0]
			} else {
				var nodes []branches.NodeInfo
				if err := c.call(cmd.Context(), http.MethodGet, "/v1/nodes", nil, &nodes); err != nil {
					return err
				}
				for _, n := range nodes {
					if n.Self {
						id = n.ID
					}
				}
				if id == "" {
					return errors.New("this server is no node of several: name the node (node ls)")
				}
			}
			if err := c.call(cmd.Context(), http.MethodPost, "/v1/nodes/"+url.PathEscape(id)+"/"+verb, nil, nil); err != nil {
				return err
			}
			fmt.Printf("node %s: %s\n", id, map[bool]string{true: "draining", false: "active"}[draining])
			return nil
		},
	}
}

func newNodeLs(g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the catalog's nodes: slot, address, epoch, state, lease and load",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var out []branches.NodeInfo
			if err := newClient(g).call(cmd.Context(), http.MethodGet, "/v1/nodes", nil, &out); err != nil {
				return err
			}
			if asJSON {
				return printJSON(out)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSLOT\tADDR\tPEER\tEPOCH\tSTATE\tLEASE\tRUNNING\tFREE GiB")
			for _, n := range out {
				id := n.ID
				if n.Self {
					id += " (this server)"
				}
				running := fmt.Sprint(n.Load.Running)
				if n.Load.MaxRunning > 0 {
					running += fmt.Sprintf("/%d", n.Load.MaxRunning)
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%.1f\n", id, n.Slot, orDash(n.Addr), orDash(n.PeerAddr), n.Epoch, n.State,
					leaseAge(n.LeaseAgeMS), running, float64(n.Load.FreeBytes)/(1<<30))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// leaseAge says when a node's lease runs out, or how long ago it did.
func leaseAge(ms int64) string {
	d := (time.Duration(ms) * time.Millisecond).Round(100 * time.Millisecond)
	if d < 0 {
		return "valid " + (-d).String()
	}
	return "expired " + d.String() + " ago"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

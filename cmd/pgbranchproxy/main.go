// Command pgbranchproxy serves copy-on-write branches of seeded Postgres databases
// behind one Postgres port, and administers a running server.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func main() {
	root := newRoot()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "pgbranchproxy:", err)
		os.Exit(1)
	}
}

// globalFlags are shared by every subcommand.
type globalFlags struct {
	stateDir string
}

func newRoot() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:           "pgbranchproxy",
		Short:         "One Postgres port in front of many copy-on-write branches of a seeded database",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return envDefaults(cmd.Flags())
		},
	}
	root.PersistentFlags().StringVar(&g.stateDir, "state-dir", "/var/lib/pgbranchproxy", "directory holding the catalog, seeds, branches and admin.sock")
	root.AddCommand(newServe(g), newSource(g), newBranch(g), newInfo(g))
	return root
}

// envDefaults sets every flag not given on the command line from PGBRANCH_<NAME>
// (upper case, '-' as '_'), if that variable is set.
func envDefaults(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || err != nil {
			return
		}
		name := "PGBRANCH_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", name, e)
			}
		}
	})
	return err
}

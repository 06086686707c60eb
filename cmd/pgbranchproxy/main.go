// Command pgbranchproxy serves copy-on-write branches of seeded Postgres databases
// behind one Postgres port, and administers a running server.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func main() {
	root := newRoot()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "pgbranchproxy:", printableLines(err.Error()))
		os.Exit(exitCode(err))
	}
}

// globalFlags are shared by every subcommand.
type globalFlags struct {
	stateDir   string
	config     string
	adminURL   string // the admin API over TCP instead of <state-dir>/admin.sock
	adminToken string
}

func newRoot() *cobra.Command {
	g := &globalFlags{}
	serve := newServe(g)
	var root *cobra.Command
	root = &cobra.Command{
		Use:           "pgbranchproxy",
		Short:         "One Postgres port in front of many copy-on-write branches of a seeded database",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			// Command line first, then PGBRANCH_* variables, then the config file.
			if err := envDefaults(cmd.Flags()); err != nil {
				return err
			}
			var skip func(string) bool
			if cmd != serve {
				skip = func(name string) bool { return serveOnly(serve, root, name) }
			}
			return configDefaults(cmd.Flags(), g.config, skip)
		},
	}
	root.PersistentFlags().StringVar(&g.stateDir, "state-dir", "/var/lib/pgbranchproxy", "directory holding the catalog, seeds, branches and admin.sock")
	root.PersistentFlags().StringVar(&g.config, "config", "", "file of flag settings, one \"name = value\" a line (# comments); the command line and PGBRANCH_* win. Serve's file serves the other commands too: they take its state-dir, admin-url and admin-token and skip serve's own settings")
	root.PersistentFlags().StringVar(&g.adminURL, "admin-url", "", "reach a server's admin API over TCP (its --admin-listen), e.g. http://db-host:6433, instead of the state directory's socket")
	root.PersistentFlags().StringVar(&g.adminToken, "admin-token", "", "bearer token for --admin-url")
	root.AddCommand(serve, newSource(g), newBranch(g), newInfo(g), newToken(g), newAudit(g), newCatalog(g), newNode(g), newCluster())
	markUsageErrors(root)
	return root
}

// onlyOnCommandLine marks the flags of a command that changes what they name
// (branch set): a PGBRANCH_* variable or config line meant for another command
// must not change a branch that the command line did not ask to change.
const onlyOnCommandLine = "pgbranch_command_line_only"

// markCommandLineOnly marks the named flags of fs as taken from the command line only.
func markCommandLineOnly(fs *pflag.FlagSet, names ...string) {
	for _, n := range names {
		if err := fs.SetAnnotation(n, onlyOnCommandLine, []string{"true"}); err != nil {
			panic(err) // a flag of the command's own definition
		}
	}
}

func commandLineOnly(f *pflag.Flag) bool { return f.Annotations[onlyOnCommandLine] != nil }

// envDefaults sets every flag not given on the command line from PGBRANCH_<NAME>
// (upper case, '-' as '_'), if that variable is set.
func envDefaults(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || err != nil || commandLineOnly(f) {
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

// serveOnly reports whether name is a setting of serve's own, not one of the
// global flags root has for every command. The other commands skip those in a
// config file, so that serve's file (--config /etc/pgbranchproxy/serve.conf) gives
// them its --state-dir and nothing meant for the server: serve's --ttl, a
// default for every branch, is not branch create's --ttl, the branch's own.
func serveOnly(serve, root *cobra.Command, name string) bool {
	return root.PersistentFlags().Lookup(name) == nil && serve.LocalFlags().Lookup(name) != nil
}

// configDefaults sets every flag not given on the command line or in the
// environment from the config file at path ("" for none). Each line is
// "name = value" with a flag's name; blank lines and lines starting with # are
// skipped. Repeatable flags may appear on several lines. Settings for which skip
// (nil: none) reports true are passed over.
func configDefaults(fs *pflag.FlagSet, path string, skip func(name string) bool) error {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	defer f.Close()
	preset := map[string]bool{}
	fs.Visit(func(fl *pflag.Flag) { preset[fl.Name] = true })
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		name, value = strings.TrimSpace(name), strings.Trim(strings.TrimSpace(value), `"`)
		if !ok || name == "" {
			return fmt.Errorf("%s:%d: want name = value", path, n)
		}
		if skip != nil && skip(name) {
			continue
		}
		if fs.Lookup(name) == nil {
			return fmt.Errorf("%s:%d: unknown setting %q (settings are the flags of pgbranchproxy serve and of the command)", path, n, name)
		}
		if preset[name] || commandLineOnly(fs.Lookup(name)) {
			continue
		}
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("%s:%d: %s: %w", path, n, name, err)
		}
	}
	return sc.Err()
}

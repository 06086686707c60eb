package main

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/pgbranchproxy/pgbranchproxy/cluster"
	"github.com/spf13/cobra"
)

// Exit codes, for scripts (CI jobs) that branch on the outcome.
const (
	exitOK       = 0 // done
	exitError    = 1 // anything else: the server failed, could not be reached, refused
	exitUsage    = 2 // bad command line: unknown command or flag, wrong arguments
	exitNotFound = 3 // the branch or source does not exist; cluster issue: the directory has no CA
	exitExists   = 4 // the branch or source already exists (create without --if-not-exists); the cluster CA or member already exists
	// serve: the node was declared dead by the catalog's janitor and stopped its
	// branches; start it again (EX_TEMPFAIL).
	exitRestart = 75
)

// errRestart: serve ended because its node was declared dead (exitRestart).
var errRestart = errors.New("the node was declared dead: start it again")

// usageError is a mistake on the command line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitCode maps an error returned by the command tree to the process's exit code.
func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errRestart):
		return exitRestart
	case errors.As(err, &ue), strings.HasPrefix(err.Error(), "unknown command"):
		return exitUsage
	case isStatus(err, http.StatusNotFound), errors.Is(err, cluster.ErrNoCA):
		return exitNotFound
	case errors.Is(err, cluster.ErrExists):
		return exitExists
	case isStatus(err, http.StatusConflict) && strings.Contains(err.Error(), "already exists"):
		return exitExists
	}
	return exitError
}

// markUsageErrors makes flag and argument errors of every command in the tree usage
// errors, and an unknown subcommand of a group (branch bogus) one too: cobra finds
// unknown commands only at the root, and would print the group's help and exit 0.
func markUsageErrors(root *cobra.Command) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c != root && c.HasSubCommands() && !c.Runnable() {
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 {
					return usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
				}
				return cmd.Help()
			}
		}
		if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					return usageError{err}
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

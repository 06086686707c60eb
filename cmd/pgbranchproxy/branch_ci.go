package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"github.com/spf13/cobra"
)

// connFlags say how a connection string to a branch is written.
type connFlags struct {
	source, host, user, password, database string
	port                                   int
}

func (f *connFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.source, "source", "", "source of the branch (default: the branch's, else the only one)")
	cmd.Flags().StringVar(&f.host, "host", "", "host clients connect to (default: the proxy's listen address, or --admin-url's host when that is a wildcard)")
	cmd.Flags().IntVar(&f.port, "port", 0, "port clients connect to (default: the proxy's)")
	cmd.Flags().StringVar(&f.user, "user", "", "role in the connection string (default: $PGUSER, else postgres)")
	cmd.Flags().StringVar(&f.password, "password", "", "password to put in the connection string (default: none; clients use PGPASSWORD)")
	cmd.Flags().StringVar(&f.database, "database", "", "database in the branch (default: the source's)")
}

// check refuses a branch name the server would refuse, and flag values that no
// line-based output (env lines, a step's output) can carry: a line break in a
// password would start a line of its own, setting a variable of its choosing.
func (f *connFlags) check(name string) error {
	if err := checkBranchName(name); err != nil {
		return err
	}
	for flag, v := range map[string]string{"--source": f.source, "--host": f.host, "--user": f.user, "--password": f.password, "--database": f.database} {
		if strings.ContainsAny(v, "\r\n\x00") {
			return usageErrorf("%s contains a line break or NUL, which a connection string printed as lines cannot carry", flag)
		}
	}
	return nil
}

// checkBranchName refuses, as a usage error, a branch name the server would refuse:
// no branch has it, and a CI job that passes a git branch's name (feature/x) must
// hear so rather than "not found", or nothing at all from destroy --if-exists.
func checkBranchName(name string) error {
	if !router.ValidBranchName(name) {
		return usageErrorf("invalid branch name %q: %s", name, router.BranchNameHint)
	}
	return nil
}

// checkExistingName is checkBranchName for commands on a branch that exists, which
// may also be a member of a warm pool (_pool-…, as branch ls --all lists it).
func checkExistingName(name string) error {
	if member, ok := strings.CutPrefix(name, "_pool-"); ok && router.ValidBranchName(member) {
		return nil
	}
	return checkBranchName(name)
}

// BranchResult is what `branch create --output json` prints.
type BranchResult struct {
	Name     string `json:"name"`
	Source   string `json:"source"`
	Created  bool   `json:"created"`
	Database string `json:"database"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	User     string `json:"user"`
	URL      string `json:"url"`
	Libpq    string `json:"libpq"`
	JDBC     string `json:"jdbc"`
}

func newBranchCreate(g *globalFlags) *cobra.Command {
	var req admin.CreateBranch
	var cf connFlags
	var ifNotExists bool
	var output string
	cmd := &cobra.Command{
		Use:   "create NAME [--source S] [--from PARENT] [--ttl DUR] [--if-not-exists] [--output text|json|env]",
		Short: "Create a branch now instead of on first connect",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains([]string{"text", "json", "env"}, output) {
				return usageErrorf("--output must be text, json or env, not %q", output)
			}
			if err := cf.check(args[0]); err != nil {
				return err
			}
			req.Name, req.Source = args[0], cf.source
			c := newClient(g)
			start := time.Now()
			created := true
			if err := c.call(cmd.Context(), http.MethodPost, "/v1/branches", req, nil); err != nil {
				if !ifNotExists || exitCode(err) != exitExists {
					return err
				}
				created = false
			}
			if output == "text" {
				if created {
					fmt.Printf("branch %s ready in %s\n", req.Name, time.Since(start).Round(time.Millisecond))
				} else {
					fmt.Printf("branch %s already exists\n", req.Name)
				}
				return nil
			}
			t, err := resolveTarget(cmd.Context(), c, g, req.Name, cf)
			if err != nil {
				return err
			}
			if output == "env" {
				fmt.Printf("PGBRANCH_BRANCH=%s\nPGBRANCH_SOURCE=%s\nPGBRANCH_CREATED=%t\n", t.Branch, t.sourceName, created)
				for _, l := range t.env() {
					fmt.Println(l)
				}
				return nil
			}
			return printJSON(BranchResult{Name: t.Branch, Source: t.sourceName, Created: created, Database: t.Database,
				Host: t.Host, Port: t.Port, User: t.User, URL: t.url(), Libpq: t.libpq(), JDBC: t.jdbc()})
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVar(&req.From, "from", "", "parent branch (default: the seed)")
	cmd.Flags().Var(durationFlag{p: (*time.Duration)(&req.TTL)}, "ttl", "destroy the branch after this long without a session: 90m, 12h, 7d (default: the server's --ttl)")
	cmd.Flags().Var(sizeFlag{&req.Quota}, "quota", "bytes the branch may own, e.g. 2GB (default: the server's --quota)")
	cmd.Flags().BoolVar(&req.Ephemeral, "ephemeral", false, "destroy the branch when its last session ends")
	cmd.Flags().BoolVar(&ifNotExists, "if-not-exists", false, "succeed, with created false, when the branch exists (it is left as it is)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text, json (name, source, created, url, libpq, jdbc) or env (PGHOST… and DATABASE_URL lines)")
	return cmd
}

func newBranchURL(g *globalFlags) *cobra.Command {
	var cf connFlags
	var format string
	cmd := &cobra.Command{
		Use:   "url NAME [--format libpq|url|jdbc|env]",
		Short: "Print a connection string for a branch (it is created on first connect)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains([]string{"libpq", "url", "jdbc", "env"}, format) {
				return usageErrorf("--format must be libpq, url, jdbc or env, not %q", format)
			}
			t, err := resolveTarget(cmd.Context(), newClient(g), g, args[0], cf)
			if err != nil {
				return err
			}
			switch format {
			case "libpq":
				fmt.Println(t.libpq())
			case "url":
				fmt.Println(t.url())
			case "jdbc":
				fmt.Println(t.jdbc())
			default:
				for _, l := range t.env() {
					fmt.Println(l)
				}
			}
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVarP(&format, "format", "f", "url", "libpq (host=… dbname=DB@BRANCH), url (postgres://…/DB%40BRANCH), jdbc or env")
	return cmd
}

func newBranchDestroy(g *globalFlags) *cobra.Command {
	var source string
	var ifExists, force bool
	cmd := &cobra.Command{
		Use:   "destroy NAME [--source S] [--if-exists] [--force]",
		Short: "Destroy a branch and its data",
		// As source rm and token rm remove theirs.
		Aliases: []string{"rm"},
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkExistingName(args[0]); err != nil {
				return err
			}
			path := "/v1/branches/" + url.PathEscape(args[0]) + branchOpQuery(source, force)
			c := newClient(g)
			err := c.call(cmd.Context(), http.MethodDelete, path, nil, nil)
			if ifExists && exitCode(err) == exitNotFound {
				// A missing branch is done; a mistyped --source is not (the branch
				// meant is still there).
				return sourceExists(cmd.Context(), c, source)
			}
			return forceHint(err, force)
		},
	}
	cmd.Flags().StringVar(&source, "source", "", "source of the branch (when the name exists in several)")
	cmd.Flags().BoolVar(&ifExists, "if-exists", false, "succeed when there is no such branch")
	cmd.Flags().BoolVar(&force, "force", false, forceUsage)
	return cmd
}

// sourceExists returns nil when source is "" or one of the server's sources, else
// a not-found error naming it.
func sourceExists(ctx context.Context, c *client, source string) error {
	if source == "" {
		return nil
	}
	var sources []branches.SourceInfo
	if err := c.call(ctx, http.MethodGet, "/v1/sources", nil, &sources); err != nil {
		return err
	}
	if !slices.ContainsFunc(sources, func(s branches.SourceInfo) bool { return s.Name == source }) {
		return &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("source %q not found", source)}
	}
	return nil
}

// resolvedTarget is a target with the source it resolved to.
type resolvedTarget struct {
	target
	sourceName string
}

// resolveTarget asks the server where its proxy listens and which source and
// database the branch name means.
func resolveTarget(ctx context.Context, c *client, g *globalFlags, name string, cf connFlags) (resolvedTarget, error) {
	if err := cf.check(name); err != nil {
		return resolvedTarget{}, err
	}
	var info branches.ServerInfo
	var sources []branches.SourceInfo
	var list []branches.Info
	if err := c.call(ctx, http.MethodGet, "/v1/branches", nil, &list); err != nil {
		return resolvedTarget{}, err
	}
	// A token that may not read the server's info or its sources (403): then the
	// host comes from --admin-url, the port is the default one and the database is
	// named like the source, unless flags say otherwise.
	for path, out := range map[string]any{"/v1/info": &info, "/v1/sources": &sources} {
		if err := c.call(ctx, http.MethodGet, path, nil, out); err != nil && !isStatus(err, http.StatusForbidden) {
			return resolvedTarget{}, err
		}
	}
	if info.Listen == "" {
		info.Listen = ":6432"
	}
	source := cf.source
	if source == "" {
		for _, b := range list {
			if b.Name == name {
				if source != "" {
					return resolvedTarget{}, usageErrorf("branch %q exists in several sources: name one with --source", name)
				}
				source = b.Source
			}
		}
	}
	if source == "" {
		source = onlySource(sources)
	}
	if len(sources) == 0 && source != "" {
		sources = []branches.SourceInfo{{Name: source, Database: source}}
	}
	i := slices.IndexFunc(sources, func(s branches.SourceInfo) bool { return s.Name == source })
	if i < 0 {
		if source == "" {
			return resolvedTarget{}, usageErrorf("several sources: name one with --source")
		}
		return resolvedTarget{}, &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("source %q not found", source)}
	}
	t := resolvedTarget{sourceName: source, target: target{Branch: name, User: cf.user, Password: cf.password, Database: cf.database}}
	if t.Database == "" {
		t.Database = defaultDatabase(sources[i])
	}
	// The database alone picks the source only when no other source has it.
	for _, s := range sources {
		if s.Name != source && slices.Contains(s.Databases, t.Database) {
			t.Source = source
		}
	}
	if t.User == "" {
		t.User = os.Getenv("PGUSER")
	}
	if t.User == "" {
		t.User = "postgres"
	}
	host, port, err := net.SplitHostPort(info.Listen)
	if err != nil {
		return resolvedTarget{}, fmt.Errorf("the server did not report its listen address (%q)", info.Listen)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if u, err := url.Parse(g.adminURL); err == nil && g.adminURL != "" {
			host = u.Hostname()
		}
	}
	t.Host, t.Port = host, cf.port
	if cf.host != "" {
		t.Host = cf.host
	}
	if t.Port == 0 {
		t.Port, _ = strconv.Atoi(port)
	}
	return t, nil
}

// onlySource is the source a branch without one is created in, as the server picks
// it: the only source, else the only one not seeded from a branch (a template of
// migrations); "" when that does not decide.
func onlySource(sources []branches.SourceInfo) string {
	if len(sources) == 1 {
		return sources[0].Name
	}
	own := ""
	for _, s := range sources {
		if s.Kind != branches.KindBranch {
			if own != "" {
				return ""
			}
			own = s.Name
		}
	}
	return own
}

// defaultDatabase is the source's database, else its only user database, else postgres.
func defaultDatabase(s branches.SourceInfo) string {
	if s.Database != "" {
		return s.Database
	}
	var user []string
	for _, d := range s.Databases {
		if d != "postgres" {
			user = append(user, d)
		}
	}
	if len(user) == 1 {
		return user[0]
	}
	return "postgres"
}

package pgbranchtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Option changes how URL makes a branch.
type Option func(*config)

type config struct {
	proxyURL   string
	adminURL   string
	adminToken string
	source     string
	keepFor    time.Duration
	migrate    MigrateFunc
	hash       string
	timeout    time.Duration
	needAdmin  bool // the caller cannot do without the admin API (Warm)
}

// WithProxyURL is the proxy's connection string (default: $PGBRANCH_URL), a URL
// whose path names the database, e.g. postgres://postgres@127.0.0.1:6432/app.
func WithProxyURL(u string) Option { return func(c *config) { c.proxyURL = u } }

// WithAdmin reaches the admin API at addr (http://host:port of --admin-listen, or the
// path of admin.sock) with token ("" for the socket). Default: $PGBRANCH_ADMIN_URL
// and $PGBRANCH_ADMIN_TOKEN, else $PGBRANCH_STATE_DIR/admin.sock.
func WithAdmin(addr, token string) Option {
	return func(c *config) { c.adminURL, c.adminToken = addr, token }
}

// WithSource branches from this source (default: $PGBRANCH_SOURCE, else the only
// source with the URL's database that is not a template).
func WithSource(name string) Option { return func(c *config) { c.source = name } }

// WithKeepFor is how long the branch of a failed test is kept after its last session
// (default 1h).
func WithKeepFor(d time.Duration) Option { return func(c *config) { c.keepFor = d } }

// WithTimeout bounds the wait for a branch, and for a template another test binary
// is migrating (default 5m).
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

func newConfig(opts []Option) config {
	c := config{proxyURL: os.Getenv("PGBRANCH_URL"), adminURL: os.Getenv("PGBRANCH_ADMIN_URL"),
		adminToken: os.Getenv("PGBRANCH_ADMIN_TOKEN"), source: os.Getenv("PGBRANCH_SOURCE"), keepFor: time.Hour,
		timeout: 5 * time.Minute}
	if c.adminURL == "" {
		dir := os.Getenv("PGBRANCH_STATE_DIR")
		if dir == "" {
			dir = "/var/lib/pgbranchproxy"
		}
		c.adminURL = filepath.Join(dir, "admin.sock")
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// URL returns a connection string for a new branch of the test's own, reached
// through the proxy: usable with database/sql (pgx's stdlib), pgx.Connect and
// pgxpool.New. The branch is destroyed after the test when it passed, and kept
// (and its connection string logged, without the password) when it failed. URL calls t.Fatal when the
// branch cannot be made.
func URL(t testing.TB, opts ...Option) string {
	t.Helper()
	c := newConfig(opts)
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	base, database, source, admin, err := c.resolve(ctx)
	if err != nil {
		t.Fatalf("pgbranchtest: %v", err)
	}
	name := BranchName(t.Name())
	kept := redacted(branchURL(base, database, name, source, false))
	u := branchURL(base, database, name, source, true)
	// One session of our own holds the ephemeral branch until the test's other
	// cleanups (closing its pools) have run, so a failed test's branch can be kept.
	pin, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("pgbranchtest: create branch %s: %v", name, err)
	}
	t.Cleanup(func() {
		t.Helper() // its log lines point at the test's call of URL
		defer pin.Close(context.Background())
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		off := false
		err := admin.call(ctx, http.MethodPatch, branchPath(source, name), map[string]any{"ttl": c.keepFor.String(), "ephemeral": &off}, nil)
		if err != nil {
			t.Logf("pgbranchtest: could not keep branch %s of the failed test: %v", name, err)
			return
		}
		t.Logf("pgbranchtest: kept branch %s of the failed test for %s after its last session: %s", name, c.keepFor, kept)
	})
	return u
}

// resolve parses the proxy's URL and finds the source the tests branch from: the
// template of the migrations when there are some (made on first use), else
// pickSource's.
func (c *config) resolve(ctx context.Context) (base *url.URL, database, source string, admin *adminClient, err error) {
	if c.proxyURL == "" {
		return nil, "", "", nil, errors.New("set PGBRANCH_URL to the proxy's connection string, e.g. postgres://postgres@127.0.0.1:6432/app")
	}
	base, err = url.Parse(c.proxyURL)
	if err != nil || (base.Scheme != "postgres" && base.Scheme != "postgresql") {
		// The value may hold a password: test logs keep what is printed here.
		why := "not a URL"
		if err == nil {
			why = fmt.Sprintf("a URL of scheme %q", base.Scheme)
		}
		return nil, "", "", nil, fmt.Errorf("PGBRANCH_URL is %s: want postgres://user@host:port/database", why)
	}
	database, _, _ = strings.Cut(strings.TrimPrefix(base.Path, "/"), "@")
	if database == "" {
		database = "postgres"
	}
	admin = newAdminClient(c.adminURL, c.adminToken)
	if source, err = c.pickSource(ctx, admin, database); err != nil {
		return nil, "", "", nil, err
	}
	if c.migrate != nil {
		if source, err = ensureTemplate(ctx, admin, base, database, source, c.migrate, c.hash); err != nil {
			return nil, "", "", nil, err
		}
	}
	return base, database, source, admin, nil
}

// pickSource returns the configured source, else the only source with database that
// is not a template, else "" (the proxy decides) when the admin API cannot tell and
// the caller needs it for nothing else.
func (c *config) pickSource(ctx context.Context, admin *adminClient, database string) (string, error) {
	if c.source != "" {
		return c.source, nil
	}
	sources, err := admin.sources(ctx)
	if err != nil {
		if c.migrate != nil || c.needAdmin {
			return "", err
		}
		return "", nil
	}
	var found []string
	for _, s := range sources {
		if !strings.HasPrefix(s.Name, templatePrefix) && slices.Contains(s.Databases, database) {
			found = append(found, s.Name)
		}
	}
	switch len(found) {
	case 0:
		var have []string
		for _, s := range sources {
			if !strings.HasPrefix(s.Name, templatePrefix) {
				have = append(have, fmt.Sprintf("%s (%s)", s.Name, strings.Join(s.Databases, ", ")))
			}
		}
		return "", fmt.Errorf("no source has database %q, the database of PGBRANCH_URL; sources: %s", database, strings.Join(have, "; "))
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("sources %v have database %q: name one with WithSource or PGBRANCH_SOURCE", found, database)
}

// branchURL is base with the database DB@BRANCH and the pgbranch options.
func branchURL(base *url.URL, database, branch, source string, ephemeral bool) string {
	u := *base
	u.Path = "/" + database + "@" + branch
	u.RawPath = "/" + strings.ReplaceAll(url.PathEscape(database), "@", "%40") + "%40" + branch
	q := u.Query()
	opts := strings.TrimSpace(q.Get("options"))
	if source != "" {
		opts += " -c pgbranch.source=" + source
	}
	if ephemeral {
		opts += " -c pgbranch.ephemeral=on"
	}
	if opts = strings.TrimSpace(opts); opts != "" {
		q.Set("options", opts)
	}
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String()
}

// redacted is the connection string u without its password (in the user part or
// the query), for a test log that CI may publish: whoever reads it to connect has
// the password already.
func redacted(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	if _, has := p.User.Password(); has {
		p.User = url.UserPassword(p.User.Username(), "xxxxx")
	}
	if q := p.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		p.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	}
	return p.String()
}

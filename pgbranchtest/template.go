package pgbranchtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
)

// templatePrefix starts the name of every template source (and of the branch it is
// migrated in).
const templatePrefix = "pgbt-"

// MigrateFunc applies migrations to the database at url (a connection string for
// the branch being migrated).
type MigrateFunc func(ctx context.Context, url string) error

// WithMigrations makes the test's branch from a template holding the migrations.
// migrations is a directory of .sql files (run in name order, each in one
// transaction) or a MigrateFunc (or a func(context.Context, string) error). The
// migrations run once per hash, whatever the number of tests and test binaries; hash
// "" for a directory is a hash of its files. Change the hash when the migrations
// change.
func WithMigrations(migrations any, hash string) Option {
	return func(c *config) {
		switch m := migrations.(type) {
		case string:
			c.migrate = SQLFiles(m)
			if hash == "" {
				hash = dirHash(m)
			}
		case MigrateFunc:
			c.migrate = m
		case func(context.Context, string) error:
			c.migrate = m
		default:
			panic(fmt.Sprintf("pgbranchtest.WithMigrations: want a directory or a MigrateFunc, not %T", migrations))
		}
		if hash == "" {
			panic("pgbranchtest.WithMigrations: a MigrateFunc needs a hash")
		}
		c.hash = hash
	}
}

// templateName is the deterministic name of the template for these migrations of
// database in generation of source's seed, the same in every test binary: after
// `source refresh` the migrations run again on the new seed. The name ends with
// the generation ("pgbt-…-g3"), so that an operator can tell old templates.
func templateName(source string, generation int, database, hash string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%s\x00%s", source, generation, database, hash))
	return fmt.Sprintf("%s%s-g%d", templatePrefix, hex.EncodeToString(sum[:8]), generation)
}

// generationOf is the seed generation of source among sources; 0 when it is not
// there (creating the migration branch then says why).
func generationOf(sources []sourceInfo, source string) int {
	for _, s := range sources {
		if s.Name == source {
			return s.Generation
		}
	}
	return 0
}

// ensureTemplate returns the template source for the migrations, creating it if no
// one has. The catalog decides who migrates: creating the branch named after the
// template succeeds for one caller, in whatever process; the others wait until the
// template source exists (or the branch is gone, after a failed migration, and try
// again).
func ensureTemplate(ctx context.Context, admin *adminClient, base *url.URL, database, source string, migrate MigrateFunc, hash string) (string, error) {
	sources, err := admin.sources(ctx)
	if err != nil {
		return "", err
	}
	generation := generationOf(sources, source)
	name := templateName(source, generation, database, hash)
	for {
		if slices.ContainsFunc(sources, func(s sourceInfo) bool { return s.Name == name }) {
			removeOldTemplates(ctx, admin, sources, source, generation)
			return name, nil
		}
		// The migration branch is ephemeral and buildTemplate holds a session on it:
		// a test binary that dies while migrating (Ctrl-C, a panic, go test's
		// -timeout) loses that session, the server destroys the branch, and the
		// binaries waiting for it migrate at once instead of waiting out their
		// timeout. The TTL covers a binary that dies before its session opens.
		err = admin.call(ctx, http.MethodPost, "/v1/branches",
			map[string]any{"name": name, "source": source, "ttl": "10m", "ephemeral": true}, nil)
		switch {
		case err == nil:
			if err := buildTemplate(ctx, admin, base, database, source, name, migrate); err != nil {
				return name, err
			}
			removeOldTemplates(ctx, admin, sources, source, generation)
			return name, nil
		case !isStatus(err, http.StatusConflict):
			return "", fmt.Errorf("create migration branch %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for template %s, which another test binary is migrating in branch %s of source %s: %w"+
				" (if that binary died, destroy the branch)", name, name, source, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
		if sources, err = admin.sources(ctx); err != nil {
			return "", err
		}
	}
}

// buildTemplate migrates the branch name and seeds the template source from it,
// holding a session on the (ephemeral) branch meanwhile; the branch is destroyed
// either way. Other tests wait for that branch to go before they migrate again
// (ensureTemplate), so a destroy that fails is part of the error.
func buildTemplate(ctx context.Context, admin *adminClient, base *url.URL, database, source, name string, migrate MigrateFunc) (err error) {
	u := branchURL(base, database, name, source, false)
	pin, perr := pgx.Connect(ctx, u)
	defer func() {
		if pin != nil {
			pin.Close(context.WithoutCancel(ctx)) // its end destroys the branch, or lets destroy do it
		}
		if derr := admin.destroy(context.WithoutCancel(ctx), branchPath(source, name)); derr != nil {
			err = errors.Join(err, fmt.Errorf("destroy migration branch %s (tests waiting for it wait out its TTL): %w", name, derr))
		}
	}()
	if perr != nil {
		pin = nil
		return fmt.Errorf("connect to migration branch %s: %w", name, perr)
	}
	if err := migrate(ctx, u); err != nil {
		return fmt.Errorf("migrations (template %s): %w", name, err)
	}
	return admin.addSourceFromBranch(ctx, name, source+"/"+name)
}

// SQLFiles is a MigrateFunc that runs the .sql files of dir in name order, each
// as one transaction. WithMigrations(dir, hash) uses it.
func SQLFiles(dir string) MigrateFunc {
	return func(ctx context.Context, url string) error {
		files, err := sqlFiles(dir)
		if err != nil {
			return err
		}
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		for _, f := range files {
			sql, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			// One simple-protocol query: several statements, one implicit transaction.
			if _, err := conn.Exec(ctx, string(sql)); err != nil {
				return fmt.Errorf("%s: %w", filepath.Base(f), err)
			}
		}
		return nil
	}
}

func sqlFiles(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no .sql files in %s", dir)
	}
	sort.Strings(files)
	return files, nil
}

// dirHash hashes the names and contents of the .sql files of dir; "" when they
// cannot be read (the migration then reports why).
func dirHash(dir string) string {
	files, err := sqlFiles(dir)
	if err != nil {
		return "unreadable:" + dir
	}
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "unreadable:" + dir
		}
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.Base(f), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

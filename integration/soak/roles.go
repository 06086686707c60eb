package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog/catalogtest"
)

// startRoles starts, for --roles, a Postgres catalog server in a directory of its
// own, c.nodes nodes (serve --role node, each on its own state directory) and
// c.fronts fronts (serve --role front) on one database of it; it seeds the source
// through the first node and waits until every other node holds a copy of the seed,
// so that fronts place new branches on all of them from the start.
func startRoles(ctx context.Context, c config, dir string) (*system, error) {
	pg, err := catalogtest.Start(ctx)
	if err != nil {
		return nil, fmt.Errorf("the catalog's server: %w", err)
	}
	s := &system{dir: dir, pg: pg, pgDir: catalogDir(pg)}
	fail := func(err error) (*system, error) {
		errs := []error{err, s.stop()}
		for _, left := range s.leftovers() {
			errs = append(errs, errors.New(left))
		}
		return nil, errors.Join(errs...)
	}
	dbURL, err := pg.NewDatabase(ctx)
	if err != nil {
		return fail(err)
	}
	s.cat = postgresCatalog(dbURL)
	for i := 1; i <= c.nodes; i++ {
		name := fmt.Sprintf("node%d", i)
		n, err := startServe(ctx, name, c.bin, filepath.Join(dir, name), filepath.Join(dir, name+".log"), true,
			append([]string{"--role", "node", "--catalog", dbURL}, serveArgs(c)...)...)
		if err != nil {
			return fail(err)
		}
		s.add(n, false)
	}
	if err := s.nodes[0].seed(ctx, filepath.Join(dir, "soak.sql")); err != nil {
		return fail(err)
	}
	for i := 1; i <= c.fronts; i++ {
		name := fmt.Sprintf("front%d", i)
		f, err := startServe(ctx, name, c.bin, filepath.Join(dir, name), filepath.Join(dir, name+".log"), false,
			"--role", "front", "--catalog", dbURL, "--auth", "trust")
		if err != nil {
			return fail(err)
		}
		s.add(f, true)
	}
	start := time.Now()
	for _, n := range s.nodes[1:] {
		if err := waitSeedCopy(ctx, n, "soak"); err != nil {
			return fail(err)
		}
	}
	fmt.Printf("soak: %d nodes and %d fronts on a Postgres catalog; the seed copied to every node in %s\n",
		len(s.nodes), len(s.fronts), time.Since(start).Round(time.Millisecond))
	return s, nil
}

// add records a process; procs lists the fronts before the nodes, the order they
// stop in.
func (s *system) add(p *serve, front bool) {
	if front {
		s.fronts = append(s.fronts, p)
	} else {
		s.nodes = append(s.nodes, p)
	}
	s.procs = append(append([]*serve(nil), s.fronts...), s.nodes...)
}

// catalogDir is the catalog server's directory: the parent of the socket directory
// its URLs name.
func catalogDir(pg *catalogtest.Server) string {
	u, err := url.Parse(pg.URL("postgres"))
	if err != nil || u.Query().Get("host") == "" {
		return ""
	}
	return filepath.Dir(u.Query().Get("host"))
}

// waitSeedCopy waits, for up to 2 minutes, until node n holds a complete copy of
// source's seed (seeds/<source>/c<id>/manifest.json).
func waitSeedCopy(ctx context.Context, n *serve, source string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if m, _ := filepath.Glob(filepath.Join(n.state, "seeds", source, "c*", "manifest.json")); len(m) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s holds no copy of the seed of %s 2 minutes after it was built:\n%s", n.name, source, n.tail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.exited:
			return fmt.Errorf("%s exited while copying the seed:\n%s", n.name, n.tail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

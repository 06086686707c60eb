package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog/catalogtest"
)

// system is what the load runs against: one serve that takes the clients and runs
// the branches, or (--roles) fronts that take the clients and nodes that run the
// branches, on a Postgres catalog the soak starts.
type system struct {
	dir    string
	nodes  []*serve // run branches; each has an admin socket
	fronts []*serve // take client sessions
	procs  []*serve // every process started, each once, in the order they stop
	cat    catalogDB
	pg     *catalogtest.Server // the Postgres catalog's server (--roles)
	pgDir  string              // its directory, removed when it stops

	once    sync.Once
	stopErr error
}

// serveArgs are the flags every process that runs branches gets: the shim, and a
// lifecycle on the soak's compressed time scale.
func serveArgs(c config) []string {
	return []string{"--shim", c.shim, "--reap-interval", "1s", "--idle-stop", c.idleStop.String(),
		// Parked server sessions retire on the soak's compressed time scale too, so
		// their descriptors level off within a short run.
		"--server-idle-timeout", "5s"}
}

// startSingle starts one serve on a SQLite catalog and seeds it.
func startSingle(ctx context.Context, c config, dir string) (*system, error) {
	state := filepath.Join(dir, "state")
	srv, err := startServe(ctx, "serve", c.bin, state, filepath.Join(dir, "serve.log"), true,
		append([]string{"--auth", "trust"}, serveArgs(c)...)...)
	if err != nil {
		return nil, err
	}
	s := &system{dir: dir, nodes: []*serve{srv}, fronts: []*serve{srv}, procs: []*serve{srv}, cat: sqliteCatalog(state)}
	if err := srv.seed(ctx, filepath.Join(dir, "soak.sql")); err != nil {
		return nil, errors.Join(err, s.stop())
	}
	return s, nil
}

// dsn is a connection string for database soak in branch, to a front chosen at
// random, as a TCP load balancer would.
func (s *system) dsn(branch string, extra ...string) string {
	return s.fronts[rand.IntN(len(s.fronts))].dsn(branch, extra...)
}

// reset asks the node that holds name to reset it: each node's admin API answers
// 404 for a branch it does not hold. A non-2xx answer is an *apiError.
func (s *system) reset(ctx context.Context, name string) error {
	var err error
	for _, n := range s.nodes {
		err = n.call(ctx, http.MethodPost, "/v1/branches/"+name+"/reset", nil)
		var ae *apiError
		if !errors.As(err, &ae) || ae.status != http.StatusNotFound {
			return err
		}
	}
	return err
}

// quiesce waits, after the load, for the ephemeral branches to go and checks that
// what runs on each node agrees with what its catalog rows say runs there.
func (s *system) quiesce(ctx context.Context) []string {
	// Ephemeral branches go by the reaper, whose pass runs its actions one after
	// another: on a loaded machine a destroy can wait behind many idle stops.
	start, deadline := time.Now(), time.Now().Add(3*time.Minute)
	for {
		quiet := true
		var state []string
		for _, n := range s.nodes {
			list, err := n.list(ctx, false)
			if err != nil {
				return []string{fmt.Sprintf("list %s's branches after the load: %v", n.name, err)}
			}
			running, busy := 0, 0
			var ephs []string
			for _, b := range list {
				if b.State == "running" {
					running++
				}
				if strings.HasPrefix(b.Name, "eph-") {
					ephs = append(ephs, b.Name+" "+b.State)
				}
				busy += b.Sessions
			}
			mounts, pms := countMounts(n.state), len(postmastersUnder(n.state))
			if len(ephs) > 0 || busy > 0 || mounts != running || pms != running {
				quiet = false
			}
			state = append(state, fmt.Sprintf("%s: %d ephemeral branches left %v, %d sessions, %d running branches, %d mounts, %d postmasters",
				n.name, len(ephs), ephs, busy, running, mounts, pms))
		}
		if quiet {
			fmt.Printf("soak: quiet %s after the load\n", time.Since(start).Round(time.Second))
			return nil
		}
		if time.Now().After(deadline) {
			return []string{"3 minutes after the load: " + strings.Join(state, "; ")}
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// stop stops the fronts, then the nodes, by their process ids, then the catalog's
// server; the first error is kept.
func (s *system) stop() error {
	s.once.Do(func() {
		var errs []error
		for _, p := range s.procs {
			errs = append(errs, p.stop())
		}
		if s.pg != nil {
			errs = append(errs, s.pg.Stop())
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// leftovers lists what is left once everything stopped: mounts and postmasters
// under a node's state directory, the catalog server's postmaster or directory.
func (s *system) leftovers() []string {
	var out []string
	for _, n := range s.nodes {
		out = append(out, n.leftovers()...)
	}
	if s.pgDir != "" {
		for _, pid := range postmastersUnder(s.pgDir) {
			out = append(out, fmt.Sprintf("the catalog's postmaster %d left running after it stopped", pid))
		}
		if _, err := os.Stat(s.pgDir); err == nil {
			out = append(out, "the catalog's directory left after it stopped: "+s.pgDir)
		}
	}
	return out
}

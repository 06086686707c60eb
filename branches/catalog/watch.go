package catalog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Route changes, as fronts learn of them. On a catalog that nodes share,
// triggers on branches and nodes send a notification on routesChannel for every
// change a front's route depends on: a branch row made or removed (not a warm
// pool member's), its owner, name or roles changed, or it became lost or stopped
// being lost; a node row made or removed, or its address or state changed.
// State changes, heartbeats and last-use times, which route nothing, send none.
// A catalog of one server has no fronts and no triggers.

// routesChannel is the notification channel of route changes.
const routesChannel = "pgbranch_routes"

// routeTriggerNames are the triggers' names; a change to them (or to the
// function) takes new names, so that catalogs made before get the new ones.
var routeTriggerNames = []string{"pgbranch_route_rows_v1", "pgbranch_route_gone_v1", "pgbranch_route_update_v1",
	"pgbranch_node_rows_v1", "pgbranch_node_update_v1"}

// oldRouteTriggers are names an earlier version used, and dropOldRouteTriggers
// removes them.
var (
	oldRouteTriggers     = []string{"pgbranch_branch_rows", "pgbranch_branch_route", "pgbranch_node_rows", "pgbranch_node_route"}
	dropOldRouteTriggers = []string{
		`DROP TRIGGER IF EXISTS pgbranch_branch_rows ON branches`, `DROP TRIGGER IF EXISTS pgbranch_branch_route ON branches`,
		`DROP TRIGGER IF EXISTS pgbranch_node_rows ON nodes`, `DROP TRIGGER IF EXISTS pgbranch_node_route ON nodes`,
		`DROP FUNCTION IF EXISTS pgbranch_route_changed()`,
	}
)

// routeTriggers creates the function and the triggers. Statements are separate:
// a function body holds semicolons.
var routeTriggers = []string{
	`CREATE OR REPLACE FUNCTION pgbranch_route_changed_v1() RETURNS trigger LANGUAGE plpgsql AS $f$
	DECLARE r record;
	BEGIN
		IF TG_OP = 'DELETE' THEN r := OLD; ELSE r := NEW; END IF;
		IF TG_TABLE_NAME = 'nodes' THEN
			PERFORM pg_notify('` + routesChannel + `', json_build_object('node', r.id)::text);
		ELSE
			PERFORM pg_notify('` + routesChannel + `', json_build_object('source', r.source, 'branch', r.name)::text);
		END IF;
		RETURN NULL;
	END $f$`,
	`CREATE OR REPLACE TRIGGER pgbranch_route_rows_v1 AFTER INSERT ON branches FOR EACH ROW
		WHEN (NOT NEW.pooled) EXECUTE FUNCTION pgbranch_route_changed_v1()`,
	`CREATE OR REPLACE TRIGGER pgbranch_route_gone_v1 AFTER DELETE ON branches FOR EACH ROW
		WHEN (NOT OLD.pooled) EXECUTE FUNCTION pgbranch_route_changed_v1()`,
	`CREATE OR REPLACE TRIGGER pgbranch_route_update_v1 AFTER UPDATE ON branches FOR EACH ROW
		WHEN (OLD.node_id IS DISTINCT FROM NEW.node_id OR OLD.roles IS DISTINCT FROM NEW.roles
			OR OLD.name IS DISTINCT FROM NEW.name OR (OLD.state = 'lost') IS DISTINCT FROM (NEW.state = 'lost'))
		EXECUTE FUNCTION pgbranch_route_changed_v1()`,
	`CREATE OR REPLACE TRIGGER pgbranch_node_rows_v1 AFTER INSERT OR DELETE ON nodes
		FOR EACH ROW EXECUTE FUNCTION pgbranch_route_changed_v1()`,
	`CREATE OR REPLACE TRIGGER pgbranch_node_update_v1 AFTER UPDATE ON nodes FOR EACH ROW
		WHEN (OLD.addr IS DISTINCT FROM NEW.addr OR OLD.state IS DISTINCT FROM NEW.state)
		EXECUTE FUNCTION pgbranch_route_changed_v1()`,
}

// NotifyRoutes makes the catalog notify route changes (Postgres 14 or later),
// once: a catalog that already has the triggers is left alone (creating them
// takes a lock on both tables). Nodes call it when they join; on SQLite it does
// nothing.
func (c *Catalog) NotifyRoutes(ctx context.Context) (err error) {
	defer c.check(&err)
	if c.d.name() != "postgres" {
		return nil
	}
	var have, old int
	if err := c.queryRow(ctx, `SELECT count(*) FILTER (WHERE tgname = ANY(?)), count(*) FILTER (WHERE tgname = ANY(?))
		FROM pg_trigger WHERE tgrelid IN ('branches'::regclass, 'nodes'::regclass)`,
		routeTriggerNames, oldRouteTriggers).Scan(&have, &old); err != nil {
		return fmt.Errorf("route triggers: %w", err)
	}
	if have == len(routeTriggerNames) && old == 0 {
		return nil
	}
	return c.tx(ctx, func(tx sqlTx) error {
		if err := c.d.lockSchema(ctx, tx.tx); err != nil {
			return err
		}
		for _, stmt := range append(dropOldRouteTriggers, routeTriggers...) {
			if _, err := tx.tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("route triggers: %w", err)
			}
		}
		return nil
	})
}

// RouteChange is one change a front's routes depend on: a branch (Source and
// Branch), a node (Node), or, when All is set, anything (the watch's connection
// was lost and changes may have been missed).
type RouteChange struct {
	Source string `json:"source"`
	Branch string `json:"branch"`
	Node   string `json:"node"`
	All    bool   `json:"-"`
	Probe  string `json:"probe"` // a watch's own check that it still hears (see probeEvery)
}

// WatchRoutes calls fn for every route change until ctx ends, on a connection of
// its own. It calls fn with All set each time it (re)connects, since changes made
// while it was not listening were not seen, and reconnects with backoff when the
// connection is lost. live is called with true once it listens and with false
// when it stops. Postgres only: on SQLite it returns at once.
func (c *Catalog) WatchRoutes(ctx context.Context, fn func(RouteChange), live func(bool)) {
	if c.d.name() != "postgres" {
		return
	}
	for wait := 100 * time.Millisecond; ctx.Err() == nil; wait = min(2*wait, 5*time.Second) {
		if c.listen(ctx, fn, live) {
			wait = 100 * time.Millisecond // it was listening: start the backoff again
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// probeEvery is how often a quiet watch checks that its connection still hears:
// it sends a notification of its own and must hear it back before the next
// check. A connection that stopped hearing (half open
// after a failover, closed by a pooler in between) is given up for a new one.
var probeEvery = 5 * time.Second

// listen listens on one connection until it fails, stops hearing, or ctx ends;
// it reports whether it got as far as listening.
func (c *Catalog) listen(ctx context.Context, fn func(RouteChange), live func(bool)) bool {
	conn, err := pgx.Connect(ctx, c.dsn)
	if err != nil {
		return false
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+routesChannel); err != nil {
		return false
	}
	live(true)
	defer live(false)
	fn(RouteChange{All: true})
	token := probeToken()
	probing := false
	for {
		wctx, cancel := context.WithTimeout(ctx, probeEvery)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return true
		case err != nil && wctx.Err() == nil:
			// Nothing is dropped now: while the catalog is away, what was read
			// before is all there is. The next connect says All.
			return true
		case err != nil && probing:
			return true // the last probe was not heard back
		case err != nil:
			// Sent on the listening connection itself (a session hears its own
			// notifications): a connection that is half open fails here or never
			// hears it back.
			pctx, cancel := context.WithTimeout(ctx, probeEvery)
			_, err := conn.Exec(pctx, `SELECT pg_notify($1, $2)`, routesChannel, `{"probe":"`+token+`"}`)
			cancel()
			if err != nil {
				return true
			}
			probing = true
			continue
		}
		var ch RouteChange
		if json.Unmarshal([]byte(n.Payload), &ch) != nil {
			ch = RouteChange{All: true}
		}
		if ch.Probe != "" {
			probing = probing && ch.Probe != token // another watcher's probes are not news
			continue
		}
		fn(ch)
	}
}

func probeToken() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

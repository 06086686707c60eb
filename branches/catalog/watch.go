package catalog

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
)

// Route changes, as fronts learn of them. On Postgres, triggers on branches and
// nodes send a notification on the channel routesChannel for every change a
// front's route depends on: a branch row inserted or deleted, or its state,
// owner or roles changed; a node row inserted or deleted, or its address, state
// or epoch changed. Heartbeats and last-use times, which change often and route
// nothing, send none. SQLite catalogs have no fronts, and no notifications.

// routesChannel is the notification channel of route changes.
const routesChannel = "pgbranch_routes"

// routeTriggers creates the triggers (Postgres only; run by setup under the
// schema lock). Statements are separate: a function body holds semicolons.
var routeTriggers = []string{
	`CREATE OR REPLACE FUNCTION pgbranch_route_changed() RETURNS trigger LANGUAGE plpgsql AS $f$
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
	`CREATE OR REPLACE TRIGGER pgbranch_branch_rows AFTER INSERT OR DELETE ON branches
		FOR EACH ROW EXECUTE FUNCTION pgbranch_route_changed()`,
	`CREATE OR REPLACE TRIGGER pgbranch_branch_route AFTER UPDATE ON branches FOR EACH ROW
		WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.node_id IS DISTINCT FROM NEW.node_id
			OR OLD.node_epoch IS DISTINCT FROM NEW.node_epoch OR OLD.roles IS DISTINCT FROM NEW.roles
			OR OLD.name IS DISTINCT FROM NEW.name)
		EXECUTE FUNCTION pgbranch_route_changed()`,
	`CREATE OR REPLACE TRIGGER pgbranch_node_rows AFTER INSERT OR DELETE ON nodes
		FOR EACH ROW EXECUTE FUNCTION pgbranch_route_changed()`,
	`CREATE OR REPLACE TRIGGER pgbranch_node_route AFTER UPDATE ON nodes FOR EACH ROW
		WHEN (OLD.addr IS DISTINCT FROM NEW.addr OR OLD.state IS DISTINCT FROM NEW.state OR OLD.epoch IS DISTINCT FROM NEW.epoch)
		EXECUTE FUNCTION pgbranch_route_changed()`,
}

// RouteChange is one change a front's routes depend on: a branch (Source and
// Branch), a node (Node), or, when All is set, anything (the watch's connection
// was lost and changes may have been missed).
type RouteChange struct {
	Source string `json:"source"`
	Branch string `json:"branch"`
	Node   string `json:"node"`
	All    bool   `json:"-"`
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

// listen listens on one connection until it fails or ctx ends; it reports
// whether it got as far as listening.
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
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			// Nothing is dropped now: while the catalog is away, what was read
			// before is all there is. The next connect says All.
			return true
		}
		var ch RouteChange
		if json.Unmarshal([]byte(n.Payload), &ch) != nil {
			ch = RouteChange{All: true}
		}
		fn(ch)
	}
}

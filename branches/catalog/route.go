package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Routes, as a front reads them: where a branch is served, without the engine. A
// front holds no branch and writes nothing; it reads the row of the branch a
// client named and the node that owns it, in one statement.

// Route is where one branch name of a source is served.
type Route struct {
	Branch Branch // the branch's row; Branch.ID is 0 when the name is free
	// The owner node as its row says; NodeAddr is "" when the branch has no owner
	// or its owner has no row.
	NodeID    string
	NodeAddr  string
	NodeState NodeState
	// NodeLive is true while the owner's lease runs, by the catalog's clock.
	NodeLive bool
}

// RouteOf reads the branch name of source and its owner node. A free name is no
// error: the Route's Branch.ID is 0.
func (c *Catalog) RouteOf(ctx context.Context, source, name string) (_ Route, err error) {
	defer c.check(&err)
	// The node's columns come from scalar subqueries, so that branchCols needs no
	// table prefix: inside them id and state are the node's, node_id the branch's.
	row := c.queryRow(ctx, `SELECT `+branchCols+`,
		COALESCE((SELECT addr FROM nodes WHERE id = node_id), ''),
		COALESCE((SELECT state FROM nodes WHERE id = node_id), ''),
		COALESCE((SELECT lease_until FROM nodes WHERE id = node_id), 0) > `+c.d.nowNanos()+`
		FROM branches WHERE source = ? AND name = ?`, source, name)
	var r Route
	b, err := scanBranch(scanTail{row: row, tail: []any{&r.NodeAddr, &r.NodeState, &r.NodeLive}})
	if errors.Is(err, sql.ErrNoRows) {
		return Route{}, nil
	}
	if err != nil {
		return Route{}, fmt.Errorf("route to %s@%s: %w", source, name, err)
	}
	r.Branch, r.NodeID = b, b.NodeID
	if r.NodeID == "" {
		r.NodeAddr, r.NodeState, r.NodeLive = "", "", false
	}
	return r, nil
}

// scanTail scans a row whose leading columns scanBranch reads and whose trailing
// ones go to tail.
type scanTail struct {
	row  *sql.Row
	tail []any
}

func (s scanTail) Scan(dest ...any) error {
	return s.row.Scan(append(dest, s.tail...)...)
}

// NewestSeeds returns each source's newest ready seed generation: the one its new
// branches are made from.
func NewestSeeds(seeds []Seed) map[string]Seed {
	newest := map[string]Seed{}
	for _, sd := range seeds {
		if sd.State == SeedReady && sd.Generation > newest[sd.Source].Generation {
			newest[sd.Source] = sd
		}
	}
	return newest
}

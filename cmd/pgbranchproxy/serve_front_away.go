package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// A front lists each live node's branches as that node gives them. The
// branches of a node that is not live (its lease ran out: stopped, cut off, or
// declared dead) it lists from the catalog, as "away" (or "lost"): left out,
// they would read as gone, and a branch of the name could not be made again.

// listKey is a branch's source and name.
type listKey struct{ source, name string }

// listed decodes the source and name of each entry of a node's list, and drops
// an entry listed already (a lost branch of a dead node that several nodes
// hold since their start).
func listed(seen map[listKey]bool, list []json.RawMessage) []json.RawMessage {
	out := list[:0]
	for _, e := range list {
		var k struct{ Name, Source string }
		if json.Unmarshal(e, &k) == nil {
			if seen[listKey{k.Source, k.Name}] {
				continue
			}
			seen[listKey{k.Source, k.Name}] = true
		}
		out = append(out, e)
	}
	return out
}

// awayBranches describes the catalog's branches of the nodes not in live that
// are not listed yet and that c may see, as the catalog last recorded them.
func awayBranches(ctx context.Context, cat *catalog.Catalog, live []catalog.Node, c admin.Caller, seen map[listKey]bool) ([]json.RawMessage, error) {
	rows, err := cat.Branches(ctx)
	if err != nil {
		return nil, err
	}
	up := map[string]bool{}
	for _, n := range live {
		up[n.ID] = true
	}
	var out []json.RawMessage
	for _, r := range rows {
		k := listKey{r.Source, r.Name}
		if r.Pooled || r.NodeID == "" || up[r.NodeID] || seen[k] || (c.Role == admin.RoleCI && !c.Owns(r.Name)) {
			continue
		}
		seen[k] = true
		info := branches.Info{Name: r.Name, Source: r.Source, State: "away", CowMode: r.CowMode, OwnedBytes: r.OwnedBytes,
			Parent: r.Parent, Ephemeral: r.Ephemeral, CreateMS: r.CreateMS, CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, Node: r.NodeID,
			Error: fmt.Sprintf("its node %s is not serving (the catalog last recorded the branch %s)", r.NodeID, r.State)}
		if r.State == catalog.Lost {
			info.State, info.Error = string(catalog.Lost), "its node was declared dead (no heartbeat for --node-dead-after); only destroying it is possible"
		}
		b, err := json.Marshal(info)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

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

// listed adds the entries of a node's list to all, each once by source and
// name (seen: where in all): a lost branch of a dead node is held by every node
// started since, and one that forgets it late (its row removed through another
// node) may still list it beside the name made again, which wins.
func listed(all []json.RawMessage, seen map[listKey]int, list []json.RawMessage) []json.RawMessage {
	for _, e := range list {
		var k struct{ Name, Source, State string }
		if json.Unmarshal(e, &k) != nil {
			all = append(all, e)
			continue
		}
		if i, ok := seen[listKey{k.Source, k.Name}]; ok {
			if k.State != string(catalog.Lost) {
				all[i] = e
			}
			continue
		}
		seen[listKey{k.Source, k.Name}] = len(all)
		all = append(all, e)
	}
	return all
}

// awayBranches describes the catalog's branches of the nodes not in live that
// are not listed yet and that c may see, as the catalog last recorded them.
func awayBranches(ctx context.Context, cat *catalog.Catalog, live []catalog.Node, c admin.Caller, seen map[listKey]int) ([]json.RawMessage, error) {
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
		if _, ok := seen[k]; ok || r.Pooled || r.NodeID == "" || up[r.NodeID] || (c.Role == admin.RoleCI && !c.Owns(r.Name)) {
			continue
		}
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

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// placement checks, once the system is quiet and before it stops, that every
// branch is on exactly one node: no name is held by two nodes, every branch a node
// holds has its catalog row and that row names the node, every row is held by the
// node it names, and every branch directory on a node's disk (branches/<row id>)
// belongs to a row of that node and every row of a node has its directory. It
// prints how many branches each node holds.
func (s *system) placement(ctx context.Context) []string {
	rows, err := s.cat.rows()
	if err != nil {
		return []string{err.Error()}
	}
	type key struct{ source, name string }
	byKey := map[key]branchRow{}
	for _, r := range rows {
		byKey[key{r.source, r.name}] = r
	}
	var problems []string
	holder := map[key]string{}    // the node that lists the branch
	nodeOf := map[string]*serve{} // node id -> node
	var counts []string
	for _, n := range s.nodes {
		id, err := nodeID(n.state)
		if err != nil {
			return append(problems, err.Error())
		}
		nodeOf[id] = n
		list, err := n.list(ctx, true)
		if err != nil {
			return append(problems, fmt.Sprintf("list %s's branches: %v", n.name, err))
		}
		counts = append(counts, fmt.Sprintf("%s %d", n.name, len(list)))
		for _, b := range list {
			k := key{b.Source, b.Name}
			if other, dup := holder[k]; dup {
				problems = append(problems, fmt.Sprintf("branch %s/%s is on %s and on %s", b.Source, b.Name, other, n.name))
			}
			holder[k] = n.name
			switch r, ok := byKey[k]; {
			case !ok:
				problems = append(problems, fmt.Sprintf("%s holds branch %s/%s, which has no catalog row", n.name, b.Source, b.Name))
			case r.node != id:
				problems = append(problems, fmt.Sprintf("%s holds branch %s/%s, whose catalog row names node %q", n.name, b.Source, b.Name, r.node))
			}
		}
		problems = append(problems, branchDirs(n, id, rows)...)
	}
	for _, r := range rows {
		n, ok := nodeOf[r.node]
		if !ok {
			problems = append(problems, fmt.Sprintf("branch %s/%s (%s) belongs to node %q, which the soak did not start", r.source, r.name, r.state, r.node))
		} else if holder[key{r.source, r.name}] != n.name {
			problems = append(problems, fmt.Sprintf("branch %s/%s (%s) belongs to %s, which does not hold it", r.source, r.name, r.state, n.name))
		}
	}
	fmt.Printf("soak: %d branches, on %s\n", len(rows), strings.Join(counts, ", "))
	return problems
}

// branchDirs compares node n's branch directories with the catalog rows of node id.
func branchDirs(n *serve, id string, rows []branchRow) []string {
	entries, err := os.ReadDir(filepath.Join(n.state, "branches"))
	if err != nil {
		return []string{fmt.Sprintf("%s's branch directories: %v", n.name, err)}
	}
	dirs := map[int64]bool{}
	var problems []string
	for _, e := range entries {
		rid, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s has a branch directory %s that names no row", n.name, e.Name()))
			continue
		}
		dirs[rid] = true
	}
	var ids []int64
	for _, r := range rows {
		if r.node != id {
			continue
		}
		if !dirs[r.id] {
			problems = append(problems, fmt.Sprintf("%s has no directory for its branch %s/%s (row %d)", n.name, r.source, r.name, r.id))
		}
		delete(dirs, r.id)
	}
	for rid := range dirs {
		ids = append(ids, rid)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, rid := range ids {
		problems = append(problems, fmt.Sprintf("%s has a branch directory branches/%d that no branch row of it names (leaked)", n.name, rid))
	}
	return problems
}

// nodeID is the id of the node on state: the state directory's id.
func nodeID(state string) (string, error) {
	b, err := os.ReadFile(filepath.Join(state, "state-id"))
	if err != nil {
		return "", fmt.Errorf("the node's id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

package front

import (
	"context"
	"hash/fnv"
	"slices"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
)

// place picks the node for a new branch: of the live, active nodes with an
// address that hold the source's newest seed (or of all of them, when none
// does: the one picked copies it), the one that ranks highest for the name
// (rendezvous hashing), so that every front that sees the same nodes sends a
// new name's clients to the same node, whose single flight creates the branch
// once.
func (b *Branches) place(ctx context.Context, source, name string) (node, addr string, err error) {
	rctx, cancel := context.WithTimeout(ctx, catalogReadTimeout)
	defer cancel()
	nodes, err := b.cat.Nodes(rctx)
	if err != nil {
		return "", "", catalogError(err)
	}
	holds, err := b.seedHolders(rctx, source)
	if err != nil {
		return "", "", catalogError(err)
	}
	live := func(n catalog.Node) bool {
		return n.State == catalog.NodeActive && n.LeaseAge < 0 && n.Addr != ""
	}
	if !slices.ContainsFunc(nodes, func(n catalog.Node) bool { return live(n) && holds[n.ID] }) {
		holds = nil
	}
	var best *catalog.Node
	bestRank := uint64(0)
	for i, n := range nodes {
		if !live(n) || holds != nil && !holds[n.ID] {
			continue
		}
		if r := rank(source, name, n.ID); best == nil || r > bestRank {
			best, bestRank = &nodes[i], r
		}
	}
	if best == nil {
		return "", "", noNodeError(nodes)
	}
	return best.ID, best.Addr, nil
}

// noNodeError says why no node can take a new branch: none is registered, every
// live one is draining, or none has a running lease (nodes that are down, or that
// have not renewed their leases since the catalog came back).
func noNodeError(nodes []catalog.Node) error {
	hint := "start a pgbranchproxy node on this catalog (serve --role node)"
	switch {
	case slices.ContainsFunc(nodes, func(n catalog.Node) bool { return n.State == catalog.NodeDraining && n.LeaseAge < 0 }):
		hint = "every live node is draining: resume one (pgbranchproxy node resume), or start another"
	case slices.ContainsFunc(nodes, func(n catalog.Node) bool { return n.State != catalog.NodeDead }):
		hint = "no node has renewed its lease lately (they are down, or the catalog was unreachable): try again in a moment; pgbranchproxy node ls shows them"
	}
	return &proxy.ClientError{Code: codeCannotConnectNow, Message: "no node is available to create the branch", Hint: hint}
}

// seedHolders returns the nodes that hold the source's newest seed; nil when
// the source or its seed is not known.
func (b *Branches) seedHolders(ctx context.Context, source string) (map[string]bool, error) {
	srcs, err := b.load(ctx, false)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(srcs, func(s sourceSeed) bool { return s.name == source })
	if i < 0 || srcs[i].seed == 0 {
		return nil, nil
	}
	ids, err := b.cat.SeedHolders(ctx, srcs[i].seed)
	if err != nil {
		return nil, err
	}
	holds := map[string]bool{}
	for _, id := range ids {
		holds[id] = true
	}
	return holds, nil
}

// rank is a node's rank for a branch name.
func rank(source, name, node string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(source))
	h.Write([]byte{0})
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(node))
	return h.Sum64()
}

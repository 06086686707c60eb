package front

import (
	"context"
	"hash/fnv"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
)

// place picks the node for a new branch: of the live, active nodes with an
// address, the one that ranks highest for the name (rendezvous hashing), so
// that every front that sees the same nodes sends a new name's clients to the
// same node, whose single flight creates the branch once.
func (b *Branches) place(ctx context.Context, source, name string) (node, addr string, err error) {
	rctx, cancel := context.WithTimeout(ctx, catalogReadTimeout)
	defer cancel()
	nodes, err := b.cat.Nodes(rctx)
	if err != nil {
		return "", "", catalogError(err)
	}
	var best *catalog.Node
	bestRank := uint64(0)
	for i, n := range nodes {
		if n.State != catalog.NodeActive || n.LeaseAge >= 0 || n.Addr == "" {
			continue
		}
		if r := rank(source, name, n.ID); best == nil || r > bestRank {
			best, bestRank = &nodes[i], r
		}
	}
	if best == nil {
		return "", "", &proxy.ClientError{Code: codeCannotConnectNow, Message: "no node is available to create the branch",
			Hint: "start a pgbranchproxy node on this catalog (serve --role node)"}
	}
	return best.ID, best.Addr, nil
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

package front

import (
	"context"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// AdminNode returns the node an admin request about the branch name of source
// goes to: the node that holds it; for a new branch (create), the node that
// holds its parent from, or else the node a session would put it on. "" when
// any node will do: there is no such branch, or the source is not given and
// there are several (the node that gets the request says so), or the branch
// was on a node declared dead (any node removes its row).
func (b *Branches) AdminNode(ctx context.Context, source, name, from string, create bool) (string, error) {
	if source == "" {
		srcs, err := b.load(ctx, false)
		if err != nil || len(srcs) != 1 {
			return "", err
		}
		source = srcs[0].name
	}
	if from != "" {
		rt, err := b.route(ctx, source, from)
		if err != nil || rt.Branch.ID == 0 {
			return "", err
		}
		return rt.NodeID, nil
	}
	rt, err := b.route(ctx, source, name)
	switch {
	case err != nil:
		return "", err
	case rt.Branch.State == catalog.Lost:
		return "", nil // any node may remove a lost branch's row
	case rt.Branch.ID != 0:
		return rt.NodeID, nil
	case !create:
		return "", nil
	}
	node, _, err := b.place(ctx, source, name)
	return node, err
}

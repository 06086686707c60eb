package branches

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// joinCatalog checks that the state directory may serve as a node of cat, one
// of several (Config.Join), and returns its node id: the directory's own id if
// the catalog knows it as a node (a node restarting) or is the single server's
// that becomes a node, or a new one for a directory that holds nothing (a node
// joining). A directory with data the catalog does not know as a node is
// refused, as bindCatalog refuses a catalog that is not the directory's:
// reconcile would remove what it has no row for. So is a catalog that a single
// server owns (bound to another state directory): it adopts rows of no node and
// treats the catalog as its own. Once a node holds the catalog (OwnNode), it
// marks it as the cluster's (markCluster), which single servers refuse.
//
// want, if set, is the node's name in the cluster (its certificate's): a new
// node takes it as its id, and a known one must have it.
func joinCatalog(ctx context.Context, cat *catalog.Catalog, stateDir, where, want string) (string, error) {
	id, err := ReadStateID(stateDir)
	if err != nil {
		return "", err
	}
	if want != "" && id != "" && id != want {
		return "", fmt.Errorf("%w: the state directory %s is node %s, and the cluster certificate names node %s; "+
			"issue this node a certificate named %s (pgbranchproxy cluster issue --role node --name %s)",
			ErrNotBound, stateDir, id, want, id, id)
	}
	catID, err := cat.StateID(ctx)
	if err != nil {
		return "", err
	}
	switch {
	case strings.HasPrefix(catID, catalog.RetiredPrefix):
		return "", fmt.Errorf("%w: the catalog %s was copied to another by catalog migrate; serve with the new catalog (--catalog)",
			ErrNotBound, where)
	case id != "" && id == catID:
		return id, nil // the single server of this directory becomes a node
	case catID != "" && catID != catalog.ClusterBinding:
		return "", fmt.Errorf("%w: the catalog %s belongs to the single server of state directory id %s; "+
			"restart that server as --role node first, and nodes can join", ErrNotBound, where, catID)
	}
	if id != "" {
		nodes, err := cat.Nodes(ctx)
		if err != nil {
			return "", err
		}
		for _, n := range nodes {
			if n.ID == id {
				return id, nil
			}
		}
	}
	hasData, err := HoldsData(stateDir)
	if err != nil {
		return "", fmt.Errorf("look for branches and seeds in %s: %w", stateDir, err)
	}
	if hasData {
		return "", fmt.Errorf("%w: the state directory %s holds branches or seeds, and the catalog %s does not know it as a node; "+
			"serve it with the catalog it was used with, or join with an empty state directory", ErrNotBound, stateDir, where)
	}
	if id == "" {
		id = cmp.Or(want, NewStateID())
		if err := WriteStateID(stateDir, id); err != nil {
			return "", err
		}
	}
	return id, nil
}

// ownCatalog claims the catalog for this server, alone or as a node, once it is
// known to be the state directory's: only then may reconcile remove what it has
// no row for.
func ownCatalog(ctx context.Context, cat *catalog.Catalog, cfg Config) (disown func(), err error) {
	where := catalog.Redact(cfg.Catalog)
	if cfg.Join {
		id, err := joinCatalog(ctx, cat, cfg.StateDir, where, cfg.NodeName)
		if err != nil {
			return nil, err
		}
		if disown, err = cat.OwnNode(ctx, id); err != nil {
			return nil, err
		}
		// Held as a node, no single server holds it: mark it the cluster's.
		if err := cat.SetStateID(ctx, catalog.ClusterBinding); err != nil {
			disown()
			return nil, err
		}
		// Fronts keep routes, and learn of their changes from the catalog.
		if err := cat.NotifyRoutes(ctx); err != nil {
			disown()
			return nil, err
		}
		return disown, nil
	}
	if disown, err = cat.Own(ctx); err != nil {
		return nil, err
	}
	if err := bindCatalog(ctx, cat, cfg.StateDir, where); err != nil {
		disown()
		return nil, err
	}
	return disown, nil
}

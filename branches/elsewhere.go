package branches

import (
	"context"
	"errors"
	"fmt"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// diffAgainst is elsewhere's operation for the branch a diff compares with.
const diffAgainst = "diff --against"

// elsewhere is what becomes of err, a branch of that name not found here for
// the admin operation what ("destroy", "reset", "stop", "set", "diff",
// diffAgainst), on a node of
// several when the catalog has the branch elsewhere. A node acts on its own
// branches only, so for another node's branch it names that node. A lost
// branch (its node declared dead) that this node does not hold is any node's
// to destroy, as a front asks of any live node: its row is removed; any other
// operation on it is refused as on a lost branch held here. source may be ""
// (any source; ErrInvalid when the catalog has the name in several). Any other
// err is returned as it is.
func (m *Manager) elsewhere(ctx context.Context, source, name, what string, err error) error {
	if !m.cfg.Join || !errors.Is(err, ErrNotFound) {
		return err
	}
	all, cerr := m.cat.Branches(ctx)
	if cerr != nil {
		return err
	}
	me, _, _ := m.cat.Registration()
	var rows []catalog.Branch
	for _, b := range all {
		if b.Name == name && !b.Pooled && (source == "" || b.Source == source) {
			rows = append(rows, b)
		}
	}
	if len(rows) > 1 {
		// As sourceOfBranch refuses for the branches held here: which one is
		// meant (the lost one to destroy?) is for the caller to say.
		srcs := make([]string, len(rows))
		for i, b := range rows {
			srcs[i] = b.Source
		}
		return fmt.Errorf("%w: branch %q exists in several sources %v: name one with --source", ErrInvalid, name, srcs)
	}
	for _, b := range rows {
		switch {
		case b.State == catalog.Lost && what == "destroy":
			if derr := m.cat.DeleteBranch(ctx, b, "admin destroy"); derr != nil {
				return fmt.Errorf("branch %q: %w", name, derr)
			}
			return nil
		case b.State == catalog.Lost:
			return fmt.Errorf("branch %q: %w; only destroying it is possible", name, ErrLost)
		case b.NodeID != "" && b.NodeID != me && what == diffAgainst:
			return fmt.Errorf("branch %q of source %q: %w on this node: it is on node %s, and branch diff --against compares two branches of one node",
				name, b.Source, ErrNotFound, b.NodeID)
		case b.NodeID != "" && b.NodeID != me:
			return fmt.Errorf("branch %q of source %q: %w on this node: it is on node %s; give the command to a front, or to that node",
				name, b.Source, ErrNotFound, b.NodeID)
		}
	}
	return err
}

package branches

import (
	"context"
	"errors"
	"fmt"
)

// elsewhere is err, a branch of that name not found here, told better on a
// node of several when the catalog has the branch on another node: a node acts
// on its own branches only, and its admin socket is not where the operator
// reaches the others. source may be "" (any source). Any other err is
// returned as it is.
func (m *Manager) elsewhere(ctx context.Context, source, name string, err error) error {
	if !m.cfg.Join || !errors.Is(err, ErrNotFound) {
		return err
	}
	all, cerr := m.cat.Branches(ctx)
	if cerr != nil {
		return err
	}
	me, _, _ := m.cat.Registration()
	for _, b := range all {
		if b.Name != name || b.Pooled || (source != "" && b.Source != source) || b.NodeID == "" || b.NodeID == me {
			continue
		}
		return fmt.Errorf("branch %q of source %q: %w on this node: it is on node %s; give the command to a front, or to that node",
			name, b.Source, ErrNotFound, b.NodeID)
	}
	return err
}

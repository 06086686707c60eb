package branches

import (
	"context"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"go.uber.org/zap"
)

// On a node of several (Config.Join) a source is added, and refreshed, on the
// node whose admin API was asked; the others learn of it from the catalog: when
// a client names a source they do not know, and at each reaper pass. Each node
// copies the seeds other nodes built (seedpull.go).

// syncSources takes, from the catalog, the sources this node does not know, the
// newer ready seeds and the warm settings of those it does, and drops the sources
// the catalog no longer has (removed on another node, which refuses while any
// node has branches of them). A source this node is removing stays out.
func (m *Manager) syncSources(ctx context.Context) error {
	srcs, err := m.cat.Sources(ctx)
	if err != nil {
		return err
	}
	seeds, err := m.cat.Seeds(ctx)
	if err != nil {
		return err
	}
	newest := catalog.NewestSeeds(seeds)
	m.mu.Lock()
	defer m.mu.Unlock()
	known := map[string]bool{}
	for _, s := range srcs {
		known[s.Name] = true
		sd, ok := newest[s.Name]
		if !ok || m.removing[s.Name] {
			continue
		}
		st := m.sources[s.Name]
		switch {
		case st == nil:
			m.sources[s.Name] = &sourceState{src: s, seed: &sd}
		case st.seed == nil || st.seed.Generation < sd.Generation:
			st.src, st.seed = s, &sd
		default:
			// Set on the node that was asked (source set --warm, through a
			// front); the pass that follows refills to it.
			st.src.Warm = s.Warm
		}
	}
	for name := range m.sources {
		if !known[name] {
			delete(m.sources, name)
		}
	}
	return nil
}

// othersHoldSource counts, on a node of several, the branches of source name
// that other nodes hold, pool members included: the source is not removed while
// there are any, as their seeds would go with the source's rows.
func (m *Manager) othersHoldSource(ctx context.Context, name string) (int, error) {
	if !m.cfg.Join {
		return 0, nil
	}
	all, err := m.cat.Branches(ctx)
	if err != nil {
		return 0, err
	}
	me, _, _ := m.cat.Registration()
	n := 0
	for _, b := range all {
		if b.Source == name && b.NodeID != me {
			n++
		}
	}
	return n, nil
}

// resolveSource finds the route's source; a node of several that knows none
// reads the catalog's sources once and tries again.
func (m *Manager) resolveSource(ctx context.Context, route router.Route) (string, error) {
	source, err := router.ResolveSource(route, m.routerSources(route))
	if err == nil || !m.cfg.Join {
		return source, err
	}
	if serr := m.syncSources(ctx); serr != nil {
		m.log.Warn("read the catalog's sources", zap.Error(serr))
		return "", err
	}
	return router.ResolveSource(route, m.routerSources(route))
}

package front

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// sourcesTTL is how long the sources and their seeds' databases and roles are
// reused before the catalog is read again (a source added meanwhile is found
// sooner: a name that resolves to nothing reads them again at once).
const sourcesTTL = 2 * time.Second

// sourceSeed is a source with its current seed's id, databases and roles.
type sourceSeed struct {
	name      string
	seed      int64 // 0 while its first seed is built
	databases []string
	roles     string
}

// resolve finds the route's source, reading the sources again once if the
// route names none of those known.
func (b *Branches) resolve(ctx context.Context, r router.Route) (sourceSeed, error) {
	for fresh := false; ; fresh = true {
		srcs, err := b.load(ctx, fresh)
		if err != nil {
			return sourceSeed{}, err
		}
		rs := make([]router.Source, len(srcs))
		for i, s := range srcs {
			rs[i] = router.Source{Name: s.name, Databases: s.databases}
		}
		name, err := router.ResolveSource(r, rs)
		if err == nil {
			return srcs[slices.IndexFunc(srcs, func(s sourceSeed) bool { return s.name == name })], nil
		}
		if fresh {
			return sourceSeed{}, err
		}
	}
}

// load returns the sources, read again when they are older than sourcesTTL or
// fresh is set. The catalog is read without holding b.mu, so that connects do not
// queue behind a slow read; when it cannot be reached, the sources read last
// serve.
func (b *Branches) load(ctx context.Context, fresh bool) ([]sourceSeed, error) {
	b.mu.Lock()
	last, at := b.sources, b.loaded
	b.mu.Unlock()
	if !fresh && last != nil && time.Since(at) < sourcesTTL {
		return last, nil
	}
	rctx, cancel := context.WithTimeout(ctx, catalogReadTimeout)
	defer cancel()
	srcs, err := b.cat.Sources(rctx)
	var seeds []catalog.Seed
	if err == nil {
		seeds, err = b.cat.Seeds(rctx)
	}
	if err != nil {
		if last != nil && errors.Is(err, catalog.ErrUnavailable) {
			return last, nil // as last read: running branches stay reachable
		}
		return nil, catalogError(err)
	}
	newest := catalog.NewestSeeds(seeds)
	out := make([]sourceSeed, 0, len(srcs))
	for _, s := range srcs {
		sd := newest[s.Name]
		out = append(out, sourceSeed{name: s.Name, seed: sd.ID, databases: sd.Databases, roles: sd.Roles})
	}
	b.mu.Lock()
	b.sources, b.loaded = out, time.Now()
	b.mu.Unlock()
	return out, nil
}

package front

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"golang.org/x/sync/singleflight"
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

// afterLogin wraps err, an error a client may be told only once it has logged
// in, with the roles of every source's current seed (a role of several sources
// as the first of them by name has it) to log in with first.
func (b *Branches) afterLogin(ctx context.Context, err error) error {
	srcs, lerr := b.load(ctx, false)
	if lerr != nil {
		return lerr
	}
	srcs = slices.Clone(srcs)
	slices.SortFunc(srcs, func(x, y sourceSeed) int { return strings.Compare(x.name, y.name) })
	sets := make([]roles.Set, 0, len(srcs))
	for _, s := range srcs {
		set, derr := roles.Decode(s.roles)
		if derr != nil {
			return derr
		}
		sets = append(sets, set)
	}
	return &roles.AfterLogin{Set: roles.Union(sets...), Err: err}
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
	// Clients that arrive together share one read, which none of them can cut
	// short: a burst of new connections is one pair of queries, not one each.
	ch := b.loads.DoChan("sources", func() (any, error) { return b.readSources() })
	var r singleflight.Result
	select {
	case r = <-ch:
	case <-ctx.Done():
		r.Err = fmt.Errorf("%w: %w", catalog.ErrUnavailable, ctx.Err())
	}
	if r.Err != nil {
		if last != nil && errors.Is(r.Err, catalog.ErrUnavailable) {
			return last, nil // as last read: running branches stay reachable
		}
		return nil, catalogError(r.Err)
	}
	return r.Val.([]sourceSeed), nil
}

// readSources reads the sources and their newest seeds from the catalog, within
// catalogReadTimeout, and keeps them.
func (b *Branches) readSources() ([]sourceSeed, error) {
	rctx, cancel := context.WithTimeout(context.Background(), catalogReadTimeout)
	defer cancel()
	srcs, seeds, err := b.sourcesRead(rctx)
	if err != nil {
		return nil, err
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

// catalogSources reads the catalog's sources and seeds (Branches.sourcesRead).
func catalogSources(cat *catalog.Catalog) func(context.Context) ([]catalog.Source, []catalog.Seed, error) {
	return func(ctx context.Context) ([]catalog.Source, []catalog.Seed, error) {
		srcs, err := cat.Sources(ctx)
		if err != nil {
			return nil, nil, err
		}
		seeds, err := cat.Seeds(ctx)
		return srcs, seeds, err
	}
}

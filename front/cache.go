package front

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// The route cache. A front reads a branch's route (its row and its node's) at a
// connect, and keeps it if it leads to a live node (so the cache holds at most
// one route per branch): for routeFresh while the catalog's notifications reach it
// (Watch), which drop a route as soon as its branch or node changes, and for
// routeUnwatched otherwise. A route whose node did not answer is dropped too.
// While the catalog cannot be reached, a cached route to a live node serves
// however old it is, so that running branches stay reachable through an outage;
// creates and wakes need the catalog and are refused meanwhile.

const (
	routeFresh     = 30 * time.Second
	routeUnwatched = time.Second
	// catalogReadTimeout bounds one read of the catalog by a front: a catalog that
	// stops answering is taken as down (cached routes serve) after it.
	catalogReadTimeout = 2 * time.Second
)

type routeKey struct{ source, branch string }

type cachedRoute struct {
	rt catalog.Route
	at time.Time
}

// routeCache is safe for concurrent use.
type routeCache struct {
	mu        sync.Mutex
	m         map[routeKey]cachedRoute
	gen       uint64 // counts changes heard, so that a read that raced one is not kept
	listening atomic.Bool
}

// get returns the cached route of k, whether it is fresh, and whether there is one.
func (c *routeCache) get(k routeKey) (rt catalog.Route, fresh, ok bool) {
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	ttl := routeUnwatched
	if c.listening.Load() {
		ttl = routeFresh
	}
	return e.rt, ok && time.Since(e.at) < ttl, ok
}

// generation returns the count of changes heard so far; take it before a read.
func (c *routeCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put keeps rt, read when the generation was gen, unless a change was heard since.
func (c *routeCache) put(k routeKey, rt catalog.Route, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.m == nil {
		c.m = map[routeKey]cachedRoute{}
	}
	c.m[k] = cachedRoute{rt: rt, at: time.Now()}
}

// forget drops the route of k (its node did not answer).
func (c *routeCache) forget(k routeKey) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}

// change drops what a change in the catalog makes stale.
func (c *routeCache) change(ch catalog.RouteChange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	switch {
	case ch.All:
		// Changes may have been missed: every route is read again before it is
		// used, but kept for an outage, when there is nothing better.
		for k, e := range c.m {
			e.at = time.Time{}
			c.m[k] = e
		}
	case ch.Node != "":
		for k, e := range c.m {
			if e.rt.NodeID == ch.Node {
				delete(c.m, k)
			}
		}
	default:
		delete(c.m, routeKey{ch.Source, ch.Branch})
	}
}

// route returns the route of source's branch name, from the cache while fresh,
// else from the catalog; when the catalog cannot be reached, from the cache if
// the route led to a live node.
func (b *Branches) route(ctx context.Context, source, name string) (catalog.Route, error) {
	k := routeKey{source, name}
	cached, fresh, ok := b.cache.get(k)
	if fresh {
		return cached, nil
	}
	gen := b.cache.generation()
	rctx, cancel := context.WithTimeout(ctx, catalogReadTimeout)
	rt, err := b.cat.RouteOf(rctx, source, name)
	cancel()
	if err == nil {
		// Only routes to a live node are kept: a free name is asked for before
		// authentication (any name a client types), and a node past its lease
		// sends no change when it renews it.
		if rt.Branch.ID != 0 && rt.NodeLive {
			b.cache.put(k, rt, gen)
		} else {
			b.cache.forget(k)
		}
		return rt, nil
	}
	if ok && errors.Is(err, catalog.ErrUnavailable) && cached.Branch.ID != 0 && cached.NodeLive {
		return cached, nil
	}
	return catalog.Route{}, catalogError(err)
}

// Watch keeps the route cache in step with the catalog until ctx ends; run it in
// a goroutine of its own. Without it, cached routes serve for a second.
func (b *Branches) Watch(ctx context.Context) {
	swept := make(chan struct{})
	go func() { b.sweepConns(ctx); close(swept) }()
	b.cat.WatchRoutes(ctx, b.cache.change, b.cache.listening.Store)
	<-swept
}

// sweepConns closes the connections to nodes kept too long, every keptFor/4,
// until ctx ends, and then every kept connection.
func (b *Branches) sweepConns(ctx context.Context) {
	t := time.NewTicker(keptFor / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			b.conns.close()
			return
		case now := <-t.C:
			b.conns.sweep(now)
		}
	}
}

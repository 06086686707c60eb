package front

import (
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// A change drops what it makes stale and nothing else: a branch its own route, a
// node every route to it; All makes every route stale (kept for an outage); a
// read that raced a change is not kept.
func TestRouteCacheChanges(t *testing.T) {
	var c routeCache
	put := func(source, branch, node string) routeKey {
		k := routeKey{source, branch}
		c.put(k, catalog.Route{Branch: catalog.Branch{ID: 1}, NodeID: node, NodeLive: true}, c.generation())
		return k
	}
	has := func(k routeKey) bool { _, _, ok := c.get(k); return ok }
	a1, a2, b1 := put("s", "a1", "na"), put("s", "a2", "na"), put("s", "b1", "nb")
	c.change(catalog.RouteChange{Source: "s", Branch: "a1"})
	if has(a1) || !has(a2) || !has(b1) {
		t.Fatal("a branch change dropped the wrong routes")
	}
	c.change(catalog.RouteChange{Node: "na"})
	if has(a2) || !has(b1) {
		t.Fatal("a node change dropped the wrong routes")
	}
	c.change(catalog.RouteChange{All: true})
	if _, fresh, ok := c.get(b1); fresh || !ok {
		t.Fatal("after All a route must be kept, but not fresh")
	}
	gen := c.generation()
	c.change(catalog.RouteChange{Source: "s", Branch: "x"})
	c.put(routeKey{"s", "x"}, catalog.Route{}, gen)
	if has(routeKey{"s", "x"}) {
		t.Fatal("a read that raced a change was kept")
	}
	k := put("s", "y", "nb")
	if _, fresh, _ := c.get(k); !fresh {
		t.Fatal("a route just read is not fresh")
	}
	c.forget(k)
	if has(k) {
		t.Fatal("forget kept the route")
	}
}

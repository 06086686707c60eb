// Package front routes sessions to the nodes that serve their branches. A front
// holds no branch and starts no server: it authenticates the client with the
// roles the catalog records, finds the branch's node in the catalog (or, for a
// new name, a node chosen by the name), and opens the session on that node's
// listener with the route in the startup parameters. The node creates or wakes
// the branch and carries the session to its server as it does for its own
// clients; its answers, errors included, reach the client through the front.
package front

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// SQLSTATEs a front sends for its own failures.
const (
	codeCannotConnectNow = "57P03"
	codeInvalidDatabase  = "3D000"
)

// sourcesTTL is how long the sources and their seeds' databases and roles are
// reused before the catalog is read again (a source added meanwhile is found
// sooner: a name that resolves to nothing reads them again at once).
const sourcesTTL = 2 * time.Second

// Dialer connects to the listener of the node id at addr.
type Dialer func(ctx context.Context, node, addr string) (net.Conn, error)

// Branches gives a front's proxy its branches: those the catalog records, each
// served by its node. Safe for concurrent use.
type Branches struct {
	cat       *catalog.Catalog
	dial      Dialer
	cache     routeCache
	ownerWait time.Duration // how long an owner that is away is waited for (ownerRetry)

	mu      sync.Mutex
	sources []sourceSeed
	loaded  time.Time
}

// sourceSeed is a source with its current seed's databases and roles.
type sourceSeed struct {
	name      string
	databases []string
	roles     string
}

// New returns the branches of the catalog cat, whose nodes are reached with
// dial (nil: plain TCP, for nodes on a private network; see TLSDialer).
func New(cat *catalog.Catalog, dial Dialer) *Branches {
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, _, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	return &Branches{cat: cat, dial: dial, ownerWait: ownerRetry}
}

// Roles returns the login roles of the route's branch, of its parent for a new
// branch of a branch, or of its source's current seed.
func (b *Branches) Roles(ctx context.Context, r router.Route) (roles.Set, error) {
	src, err := b.resolve(ctx, r)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{r.Branch, r.Options.From} {
		if name == "" {
			continue
		}
		rt, err := b.route(ctx, src.name, name)
		if err != nil {
			return nil, err
		}
		if rt.Branch.ID != 0 && rt.Branch.Roles != "" {
			return roles.Decode(rt.Branch.Roles)
		}
	}
	if src.roles == "" {
		return nil, noSuchBranch()
	}
	return roles.Decode(src.roles)
}

// Acquire finds the node that serves the route's branch: its owner, the owner of
// its parent for a new branch of a branch, else the live node place picks. The
// node counts the session; the lease only connects to it.
func (b *Branches) Acquire(ctx context.Context, r router.Route) (proxy.Lease, error) {
	src, err := b.resolve(ctx, r)
	if err != nil {
		return nil, err
	}
	opts := withSource(r.Options, src.name)
	k := routeKey{src.name, r.Branch}
	rt, err := b.route(ctx, src.name, r.Branch)
	if err != nil {
		return nil, err
	}
	if rt.Branch.ID == 0 && r.Options.From != "" {
		k = routeKey{src.name, r.Options.From}
		if rt, err = b.route(ctx, src.name, r.Options.From); err != nil {
			return nil, err
		}
		if rt.Branch.ID == 0 {
			return nil, noSuchBranch()
		}
	}
	if rt.Branch.ID == 0 {
		node, addr, err := b.place(ctx, src.name, r.Branch)
		if err != nil {
			return nil, err
		}
		return &lease{node: node, addr: addr, opts: opts, dial: b.dial, wait: b.ownerWait}, nil
	}
	if rt.Branch.State == catalog.Lost {
		if k.branch == r.Branch && (r.Options.Ephemeral || r.Options.Reset) {
			return b.recreate(ctx, rt.Branch, src.name, r.Branch, opts)
		}
		return nil, &proxy.ClientError{Code: codeCannotConnectNow, Message: "the branch was on a lost node",
			Hint: "its node was declared dead; destroy the branch (pgbranchproxy branch destroy) to use the name again"}
	}
	if rt.NodeState != catalog.NodeDead && (!rt.NodeLive || rt.NodeAddr == "") {
		rt = b.awaitOwner(ctx, k, rt)
	}
	if rt.NodeAddr == "" || rt.NodeState == catalog.NodeDead || !rt.NodeLive {
		return nil, &proxy.ClientError{Code: codeCannotConnectNow, Message: "the branch's node is not serving",
			Hint: "the node that holds the branch has not renewed its lease; try again when it is back",
			Err:  fmt.Errorf("node %s at %q, %s, lease live %v", rt.NodeID, rt.NodeAddr, rt.NodeState, rt.NodeLive)}
	}
	return &lease{node: rt.NodeID, addr: rt.NodeAddr, opts: opts, dial: b.dial, wait: b.ownerWait,
		unreachable: func() { b.cache.forget(k) }}, nil
}

// recreate makes a lost branch anew from its source's seed: a client asking for
// an ephemeral branch, or for a reset, wants the seed's data, which it gets on a
// live node. The lost row (its data was on the dead node) is removed, which any
// process may do, and the new branch is placed as a new name is; the client is
// told with a NOTICE.
func (b *Branches) recreate(ctx context.Context, lost catalog.Branch, source, name string, opts router.Options) (proxy.Lease, error) {
	if err := b.cat.DeleteBranch(ctx, lost, "recreated: its node was lost"); err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return nil, catalogError(err)
	}
	b.cache.forget(routeKey{source, name})
	node, addr, err := b.place(ctx, source, name)
	if err != nil {
		return nil, err
	}
	return &noticeLease{lease: lease{node: node, addr: addr, opts: opts, dial: b.dial, wait: b.ownerWait},
		notices: []string{"branch " + name + " was on a node that was lost; it was made again from its source's seed"}}, nil
}

// awaitOwner reads the route of k again until its node's lease runs again and
// it has an address (a node registers before it listens), for up to
// b.ownerWait: a node that restarts (a new process, a pod restart) is back
// within that time, and its clients wait for it rather than fail. It returns the
// last route read.
func (b *Branches) awaitOwner(ctx context.Context, k routeKey, rt catalog.Route) catalog.Route {
	deadline := time.Now().Add(b.ownerWait)
	for (!rt.NodeLive || rt.NodeAddr == "") && rt.NodeState != catalog.NodeDead && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return rt
		case <-time.After(250 * time.Millisecond):
		}
		next, err := b.cat.RouteOf(ctx, k.source, k.branch)
		if err != nil || next.Branch.ID != rt.Branch.ID {
			return rt
		}
		rt = next
	}
	return rt
}

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
		out = append(out, sourceSeed{name: s.Name, databases: sd.Databases, roles: sd.Roles})
	}
	b.mu.Lock()
	b.sources, b.loaded = out, time.Now()
	b.mu.Unlock()
	return out, nil
}

// catalogError is what a client is told when the catalog failed.
func catalogError(err error) error {
	if errors.Is(err, catalog.ErrUnavailable) {
		return &proxy.ClientError{Code: codeCannotConnectNow, Message: "catalog unavailable",
			Hint: "sessions already open go on; new ones work again when the catalog is back", Err: err}
	}
	return err
}

func noSuchBranch() error {
	return &proxy.ClientError{Code: codeInvalidDatabase, Message: "no such source or branch"}
}

func withSource(o router.Options, source string) router.Options {
	o.Source = source
	return o
}

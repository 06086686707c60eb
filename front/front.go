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
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/errs"
	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"golang.org/x/sync/singleflight"
)

// SQLSTATEs a front sends for its own failures.
const (
	codeCannotConnectNow = "57P03"
	codeInvalidDatabase  = "3D000"
)

// Dialer connects to the listener of the node id at addr.
type Dialer func(ctx context.Context, node, addr string) (net.Conn, error)

// Branches gives a front's proxy its branches: those the catalog records, each
// served by its node. Safe for concurrent use.
type Branches struct {
	cat       *catalog.Catalog
	dial      Dialer
	cache     routeCache
	conns     nodeConns     // idle connections to nodes, for the next sessions
	ownerWait time.Duration // how long an owner that is away is waited for, connects included (ownerRetry)
	pollEvery time.Duration // how often the route of a branch whose owner is away is read (pollEvery)
	polls     ownerPolls
	// ownerRead reads a route for awaitOwner: the catalog's RouteOf.
	ownerRead func(ctx context.Context, source, name string) (catalog.Route, error)

	loads singleflight.Group // reads of the sources, shared (load)
	// sourcesRead reads the sources and their seeds for load: the catalog's.
	sourcesRead func(ctx context.Context) ([]catalog.Source, []catalog.Seed, error)
	mu          sync.Mutex
	sources     []sourceSeed
	loaded      time.Time
}

// New returns the branches of the catalog cat, whose nodes are reached with
// dial (nil: plain TCP, for nodes on a private network; see TLSDialer).
func New(cat *catalog.Catalog, dial Dialer) *Branches {
	if dial == nil {
		d := nodeDialer()
		dial = func(ctx context.Context, _, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	return &Branches{cat: cat, dial: dial, ownerWait: ownerRetry, pollEvery: pollEvery, ownerRead: cat.RouteOf,
		sourcesRead: catalogSources(cat)}
}

// Roles returns the login roles of the route's branch, of its parent for a new
// branch of a branch, or of its source's current seed. A route whose source
// cannot be told in a way that names sources or databases gets a
// *roles.AfterLogin, as from the engine (branches.Manager.Roles).
func (b *Branches) Roles(ctx context.Context, r router.Route) (roles.Set, error) {
	src, err := b.resolve(ctx, r)
	if err != nil && router.NamesSources(err) {
		return nil, b.afterLogin(ctx, err)
	}
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
// node counts the session; the lease only connects to it. An owner that is away
// is waited for, and then connected to, until one deadline, b.ownerWait after
// Acquire began.
func (b *Branches) Acquire(ctx context.Context, r router.Route) (proxy.Lease, error) {
	deadline := time.Now().Add(b.ownerWait)
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
			return nil, noParent(src.name, r.Branch, r.Options.From)
		}
	}
	if rt.Branch.ID == 0 {
		node, addr, err := b.place(ctx, src.name, r.Branch)
		if err != nil {
			return nil, err
		}
		return b.placed(k, node, addr, opts, deadline, nil), nil
	}
	if rt.NodeID != "" && rt.Branch.State != catalog.Lost && waiting(rt) {
		rt = b.awaitOwner(ctx, k, rt, deadline)
	}
	// Lost before the wait, or during it (the janitor declared the node dead).
	if rt.Branch.State == catalog.Lost {
		if k.branch == r.Branch && (r.Options.Ephemeral || r.Options.Reset) {
			return b.recreate(ctx, rt.Branch, src.name, r.Branch, opts, deadline)
		}
		return nil, fmt.Errorf("branch %q of source %q: %w", r.Branch, src.name, catalog.ErrLost)
	}
	if rt.NodeAddr == "" || rt.NodeState == catalog.NodeDead || !rt.NodeLive {
		return nil, &proxy.ClientError{Code: codeCannotConnectNow, Message: "the branch's node is not serving",
			Hint: "the node that holds the branch has not renewed its lease; try again when it is back",
			Err:  fmt.Errorf("node %s at %q, %s, lease live %v", rt.NodeID, rt.NodeAddr, rt.NodeState, rt.NodeLive)}
	}
	return b.owned(k, rt.NodeID, rt.NodeAddr, opts, deadline), nil
}

// recreate makes a lost branch anew from its source's seed: a client asking for
// an ephemeral branch, or for a reset, wants the seed's data, which it gets on a
// live node. The lost row (its data was on the dead node) is removed, which any
// process may do, by its id while it is still lost, and the new branch is placed
// as a new name is; the client is told with a NOTICE. A lost row another process
// removed first is gone all the same; a row of that id that is no longer lost is
// not the one read, and the client is asked to try again.
func (b *Branches) recreate(ctx context.Context, lost catalog.Branch, source, name string, opts router.Options, deadline time.Time) (proxy.Lease, error) {
	err := b.cat.DeleteBranch(ctx, lost, "recreated: its node was lost")
	b.cache.forget(routeKey{source, name})
	switch {
	case err == nil, errors.Is(err, catalog.ErrNotFound):
	case errors.Is(err, catalog.ErrFenced):
		return nil, &proxy.ClientError{Code: codeCannotConnectNow, Message: "the branch changed while it was being made again",
			Hint: "try again in a moment", Err: err}
	default:
		return nil, catalogError(err)
	}
	node, addr, err := b.place(ctx, source, name)
	if err != nil {
		return nil, err
	}
	return b.placed(routeKey{source, name}, node, addr, opts, deadline,
		[]string{"branch " + name + " was on a node that was lost; it was made again from its source's seed"}), nil
}

// placed is the lease of a new name k placed on node, with notices for its
// client: if the node refuses the session, its Reroute follows the name
// (follower).
func (b *Branches) placed(k routeKey, node, addr string, opts router.Options, deadline time.Time, notices []string) proxy.Lease {
	l := b.lease(k, node, addr, opts, deadline)
	l.reroute = b.follower(k, node, opts, deadline, notices)
	return withNotices(l, notices)
}

// owned is the lease to the node that holds k's branch; one that does not
// answer drops k's cached route.
func (b *Branches) owned(k routeKey, node, addr string, opts router.Options, deadline time.Time) *lease {
	l := b.lease(k, node, addr, opts, deadline)
	l.unreachable = func() { b.cache.forget(k) }
	return l
}

// lease is the lease of a session on k's branch on node at addr, on one of
// the connections kept to it when there is one.
func (b *Branches) lease(k routeKey, node, addr string, opts router.Options, deadline time.Time) *lease {
	return &lease{node: node, addr: addr, opts: opts, dial: b.dial, deadline: deadline, conns: &b.conns, kept: new(atomic.Bool),
		confirm: func(ctx context.Context) error { return b.confirm(ctx, k, node) }}
}

// withNotices gives l's client notices, if any.
func withNotices(l *lease, notices []string) proxy.Lease {
	if len(notices) == 0 {
		return l
	}
	return &noticeLease{lease: *l, notices: notices}
}

// follower returns the Reroute of a new name k placed on node: the route read
// again from the catalog; when the name's branch is on another live node, the
// lease to it; when the name has no row (the node refused before it made one:
// it was drained, or lost its registration, meanwhile), the lease to the node
// the name is placed on now, if another.
func (b *Branches) follower(k routeKey, placed string, opts router.Options, deadline time.Time, notices []string) func(context.Context) (proxy.Lease, error) {
	return func(ctx context.Context) (proxy.Lease, error) {
		b.cache.forget(k)
		rt, err := b.route(ctx, k.source, k.branch)
		if err != nil {
			return nil, err
		}
		if rt.Branch.ID == 0 {
			node, addr, err := b.place(ctx, k.source, k.branch)
			if err != nil || node == placed {
				return nil, nil
			}
			return withNotices(b.lease(k, node, addr, opts, deadline), notices), nil
		}
		if rt.NodeID == placed || rt.NodeAddr == "" || !rt.NodeLive || rt.NodeState == catalog.NodeDead || rt.Branch.State == catalog.Lost {
			return nil, nil
		}
		return withNotices(b.owned(k, rt.NodeID, rt.NodeAddr, opts, deadline), notices), nil
	}
}

// catalogError is what a client is told when the catalog failed.
func catalogError(err error) error {
	if errors.Is(err, catalog.ErrUnavailable) {
		return &proxy.ClientError{Code: codeCannotConnectNow, Message: "catalog unavailable",
			Hint: "sessions already open go on; new ones work again when the catalog is back", Err: err}
	}
	return err
}

func noSuchBranch() error { return errs.ErrNotFound }

// noParent is what a client asking for a new branch of parent, which source
// does not have, is told: what a single server tells it.
func noParent(source, name, parent string) error {
	return &proxy.ClientError{Code: codeInvalidDatabase, Message: fmt.Sprintf("parent branch %q does not exist", parent),
		Hint: fmt.Sprintf("branch %q was not created: pgbranch.from names a branch of source %q to branch from (pgbranchproxy branch ls lists them)", name, source)}
}

func withSource(o router.Options, source string) router.Options {
	o.Source = source
	return o
}

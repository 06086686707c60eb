package front

import (
	"context"
	"sync"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// The wait for an away owner. A client whose branch's node is away (its lease
// ran out, or it has registered and does not listen yet) waits for the node to
// come back. Every client waiting for one branch shares one read of its route:
// the route is read at most once per pollEvery, by one of them at a time, with
// a context of its own (one client hanging up fails no other's read), and each
// waiter takes the latest route read. A waiter stops at its deadline, which is
// also where its lease stops trying to connect (lease.Dial): the wait for the
// lease and the connect retries together end ownerRetry after Acquire began.

// pollEvery is how often the route of a branch whose node is away is read.
const pollEvery = 250 * time.Millisecond

// pollKey names one branch row waited for: a name made again is another row,
// with a wait of its own.
type pollKey struct {
	routeKey
	id int64
}

// ownerPoll is the shared read of one branch's route; its fields are guarded by
// ownerPolls.mu.
type ownerPoll struct {
	waiters int
	rt      catalog.Route // the last route read
	at      time.Time     // when the last read began; zero before the first
	final   bool          // the last read ended the wait: the node is back or dead, or the row is gone
	reading chan struct{} // closed when the read under way ends; nil when none is
}

// ownerPolls holds the reads of the branches being waited for. The zero value
// is ready; safe for concurrent use.
type ownerPolls struct {
	mu sync.Mutex
	m  map[pollKey]*ownerPoll
}

// join returns the poll of k, counting the caller as one of its waiters until
// it leaves; a new poll starts from rt, the route that made its first waiter
// wait.
func (ps *ownerPolls) join(k pollKey, rt catalog.Route) *ownerPoll {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.m == nil {
		ps.m = map[pollKey]*ownerPoll{}
	}
	p := ps.m[k]
	if p == nil {
		p = &ownerPoll{rt: rt}
		ps.m[k] = p
	}
	p.waiters++
	return p
}

// leave ends the caller's wait on p; the last waiter drops the poll.
func (ps *ownerPolls) leave(k pollKey, p *ownerPoll) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p.waiters--; p.waiters == 0 && ps.m[k] == p {
		delete(ps.m, k)
	}
}

// next returns a route of p read no longer than every ago: the last one read,
// the one being read (waited for), or one it starts to read. The zero Route
// means the wait is over for this waiter (ctx ended, or deadline passed while
// the read was under way).
func (ps *ownerPolls) next(ctx context.Context, p *ownerPoll, every time.Duration, deadline time.Time,
	read func(context.Context) (catalog.Route, error)) catalog.Route {
	ps.mu.Lock()
	ch := p.reading
	if ch == nil && (p.final || !p.at.IsZero() && time.Since(p.at) < every) {
		defer ps.mu.Unlock()
		return p.rt
	}
	if ch == nil {
		ch = make(chan struct{})
		p.reading, p.at = ch, time.Now()
		// The read is the waiters', not this client's: it goes on, bounded by
		// catalogReadTimeout, if this one leaves.
		go ps.read(context.WithoutCancel(ctx), p, ch, read)
	}
	ps.mu.Unlock()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ch:
	case <-ctx.Done():
		return catalog.Route{}
	case <-t.C:
		return catalog.Route{}
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return p.rt
}

// read reads the route for every waiter of p and ends the read ch. A failed read
// keeps the route read before, and the wait goes on to the next poll: the
// catalog that answered once within the wait is coming back (a failover to a
// standby, a pooled connection found dead, a read slower than
// catalogReadTimeout on a loaded host) while the node renews its lease, which
// its heartbeats retry every 2 s. Each waiter still stops at its deadline.
func (ps *ownerPolls) read(ctx context.Context, p *ownerPoll, ch chan struct{}, read func(context.Context) (catalog.Route, error)) {
	rctx, cancel := context.WithTimeout(ctx, catalogReadTimeout)
	rt, err := read(rctx)
	cancel()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if err == nil {
		p.rt, p.final = rt, !waiting(rt)
	}
	p.reading = nil
	close(ch)
}

// waiting reports whether rt is of a branch whose node is away: not declared
// dead, and its lease not running or its address not known yet.
func waiting(rt catalog.Route) bool {
	return rt.Branch.ID != 0 && rt.NodeState != catalog.NodeDead && (!rt.NodeLive || rt.NodeAddr == "")
}

// awaitOwner reads the route of k again, with every other client waiting for the
// same branch (ownerPolls), until its node's lease runs again and it has an
// address (a node registers before it listens), or until deadline: a node that
// restarts (a new process, a pod restart) is back within ownerRetry, and its
// clients wait for it rather than fail. It returns the last route read, or rt
// when the wait ended without one of the same row.
func (b *Branches) awaitOwner(ctx context.Context, k routeKey, rt catalog.Route, deadline time.Time) catalog.Route {
	pk := pollKey{k, rt.Branch.ID}
	p := b.polls.join(pk, rt)
	defer b.polls.leave(pk, p)
	read := func(ctx context.Context) (catalog.Route, error) { return b.ownerRead(ctx, k.source, k.branch) }
	for waiting(rt) {
		wait := min(b.pollEvery, time.Until(deadline))
		if wait <= 0 {
			return rt
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return rt
		case <-t.C:
		}
		next := b.polls.next(ctx, p, b.pollEvery, deadline, read)
		if next.Branch.ID != rt.Branch.ID {
			return rt
		}
		rt = next
	}
	return rt
}

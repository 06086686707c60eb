package branches

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"go.uber.org/zap"
)

// Lease is one session's hold on a running branch. While a Lease is held the branch
// is not stopped, reset or destroyed by the manager. Safe for concurrent use.
type Lease struct {
	m       *Manager
	b       *branch
	socket  string
	once    sync.Once
	Source  string // the source the route resolved to
	Branch  string
	Created bool // this acquisition created the branch
	use     leaseUse
	// internal: the engine's own work holds the lease (acquireExisting), which
	// reset, stop and destroy with Force wait for rather than end.
	internal bool
	// idleEpoch is the branch's idleEpoch when the lease was given (under m.mu).
	idleEpoch int64
}

// Dial connects to the branch server's unix socket.
func (l *Lease) Dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", l.socket)
	if err != nil {
		sock, rerr := l.m.revive(ctx, l.b, l.use.inst)
		switch {
		case rerr == nil:
			l.socket = sock // the server died under the lease and was started again
			c, err = d.DialContext(ctx, "unix", sock)
		case !errors.Is(rerr, errServerAlive):
			// Why the server is gone and stays gone (the manager closing, the branch
			// fenced, its node lost) is what the client is told, not the refused dial.
			err = fmt.Errorf("%w (after the branch server's socket refused: %w)", rerr, err)
		}
	}
	if err != nil {
		l.use.failed.Store(true)
	}
	return c, err
}

// Release ends the session. It is safe to call more than once.
func (l *Lease) Release() {
	l.once.Do(func() {
		l.m.mu.Lock()
		l.b.sessions--
		if l.internal {
			l.b.internal--
		}
		l.use.release(l.b, l.m.now())
		l.m.signalRoomLocked()
		kick := l.b.sessions == 0 && (l.b.rec.Ephemeral || l.b.overQuota)
		later := kick && !l.b.overQuota && l.m.claimingLocked(l.b.rec.Source)
		l.m.mu.Unlock()
		switch {
		case later:
			l.m.reapSoon() // the destroy would wait anyway (burst.go)
		case kick:
			l.m.kickReaper()
		}
	})
}

// Acquire returns a lease on the branch route names, creating the branch from its
// source's newest seed on first use or starting it when it is stopped. Creation and
// wake run detached from ctx and are shared by every caller that races for the same
// branch; if ctx ends first Acquire returns an error wrapping ErrNotReady and the work
// goes on.
func (m *Manager) Acquire(ctx context.Context, route router.Route) (*Lease, error) {
	return m.acquire(ctx, route, false)
}

// acquireExisting is Acquire for the engine's own work on a branch that must exist
// (a diff, a fork's parent, a snapshot): it creates none, and an ephemeral branch
// whose last session ended is not found.
func (m *Manager) acquireExisting(ctx context.Context, route router.Route) (*Lease, error) {
	return m.acquire(ctx, route, true)
}

func (m *Manager) acquire(ctx context.Context, route router.Route, existing bool) (*Lease, error) {
	source, err := m.resolveSource(ctx, route)
	if err != nil {
		return nil, err
	}
	if err := m.checkDatabase(ctx, source, route); err != nil {
		return nil, err
	}
	k := key{source, route.Branch}
	created, resetDone := false, !route.Options.Reset
	claimed := false     // a claim from the warm pool was tried and failed
	var roomBy time.Time // how long to wait for room under MaxRunning (room.go)
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, ErrClosed
		}
		b := m.branches[k]
		var o *op
		switch {
		case existing && (b == nil || b.ended()):
			m.mu.Unlock()
			return nil, fmt.Errorf("branch %q of source %q: %w", k.name, k.source, ErrNotFound)
		case b == nil:
			if o = m.claimLocked(k, route, claimed); o != nil {
				created, resetDone = true, true // a member is at its base already
				break
			}
			if m.overBudgetLocked() {
				m.mu.Unlock()
				if err := m.makeBudgetRoom(ctx); err != nil {
					return nil, err
				}
				continue // the world may have changed while unlocked
			}
			victim, again, err := m.roomOrWaitLocked(ctx, &roomBy)
			if again {
				continue
			} else if err != nil {
				return nil, err
			} else if victim != nil {
				o = victim
				break
			}
			nb, err := m.newBranchLocked(k, route)
			if err != nil {
				m.mu.Unlock()
				return nil, err
			}
			m.branches[k] = nb
			o = m.startOp(nb, "create", func(ctx context.Context) error { return m.create(ctx, nb, "first connection") })
			created, resetDone = true, true
		case b.op != nil:
			o = b.op
		case b.fenced:
			m.mu.Unlock()
			return nil, m.fencedErr(k.name)
		case b.rec.State == catalog.Lost:
			id := b.rec.ID
			m.mu.Unlock()
			if m.lostRowGone(ctx, k, id) {
				continue // a new branch of the name
			}
			return nil, fmt.Errorf("branch %q: %w", k.name, ErrLost)
		case b.ended():
			// Gone for its clients, its destroy held back (burst.go): this
			// connection gets a new branch of the name once it is done.
			o = m.destroyEndedLocked(b)
		case route.Options.From != "" && route.Options.From != b.rec.Parent:
			parent := "the seed"
			if b.rec.Parent != "" {
				parent = fmt.Sprintf("branch %q", b.rec.Parent)
			}
			m.mu.Unlock()
			return nil, fmt.Errorf("branch %q was made from %s, not from %q: %w", k.name, parent, route.Options.From, ErrOtherParent)
		case serverExited(b):
			o = m.recordExitLocked(b) // never lease a dead server's socket
		case b.overQuota:
			m.mu.Unlock()
			return nil, m.quotaError(b)
		case !resetDone:
			if b.sessions > 0 {
				m.mu.Unlock()
				return nil, fmt.Errorf("%w: cannot reset branch %q: it has %d other sessions", ErrBusy, k.name, b.sessions)
			}
			resetDone = true
			o = m.resetOnConnectLocked(b, route.Params["user"])
		case b.rec.State == catalog.Running && b.inst != nil:
			if limit := m.cfg.MaxSessions; limit > 0 && b.sessions >= limit {
				m.mu.Unlock()
				return nil, fmt.Errorf("%w: branch %q has %d", ErrTooManySessions, k.name, b.sessions)
			}
			return m.leaseLocked(ctx, b, k, route.Branch, created, existing), nil
		default:
			victim, again, err := m.roomOrWaitLocked(ctx, &roomBy)
			if again {
				continue
			} else if err != nil {
				return nil, err
			} else if victim != nil {
				o = victim
				break
			}
			o = m.wakeLocked(b, k)
		}
		m.mu.Unlock()
		select {
		case <-o.done:
			if errors.Is(o.err, errClaimFailed) && !claimed {
				claimed = true // at most one claim per connection; then a cold create
				created = false
				continue
			}
			if o.err != nil {
				return nil, o.err
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("branch %q: %w (%v)", route.Branch, ErrNotReady, context.Cause(ctx))
		}
	}
}

// roomOrWaitLocked is roomLocked for a connection: when no branch can make room,
// it unlocks m.mu and waits for some (waitRoom), saying whether to look again,
// or returns roomLocked's error once the wait is over. m.mu is held.
func (m *Manager) roomOrWaitLocked(ctx context.Context, roomBy *time.Time) (victim *op, again bool, err error) {
	victim, err = m.roomLocked()
	if err == nil {
		return victim, false, nil
	}
	signal := m.roomSignalLocked()
	m.mu.Unlock()
	if waitRoom(ctx, signal, roomBy) {
		return nil, true, nil
	}
	return nil, false, err
}

// leaseLocked gives a session of b, running, a lease, and unlocks m.mu. route
// names the branch as the client did; created says this acquisition made it;
// existing marks the engine's own work (acquireExisting).
func (m *Manager) leaseLocked(ctx context.Context, b *branch, k key, branch string, created, existing bool) *Lease {
	b.sessions++
	b.peak = max(b.peak, b.sessions)
	// The engine's own work (a diff, a fork of it) is no session: an
	// ephemeral branch no client has used yet stays for its first.
	b.hadSession = b.hadSession || !existing
	l := &Lease{m: m, b: b, socket: b.inst.SocketPath(), Source: k.source, Branch: branch, Created: created, internal: existing,
		idleEpoch: b.idleEpoch}
	if existing {
		b.internal++
	}
	l.use.prev, l.use.at, l.use.inst = b.rec.LastUsedAt, m.now(), b.inst
	b.rec.LastUsedAt = l.use.at
	m.running.Get(k)
	// Only an ephemeral branch's restart needs to know (reconcile).
	first, id := b.rec.Ephemeral && !b.rec.HadSession && !existing, b.rec.ID
	b.rec.HadSession = b.rec.HadSession || first
	m.mu.Unlock()
	if first {
		m.recordFirstSession(ctx, b, id, k.name)
	}
	return l
}

// resetOnConnectLocked starts resetting b for a client of role user that asked
// for it (pgbranch.reset=on). m.mu is held and b has no other session.
func (m *Manager) resetOnConnectLocked(b *branch, user string) *op {
	return m.startOp(b, "reset", func(ctx context.Context) error {
		start := time.Now()
		err := m.resetBranch(ctx, b, fmt.Sprintf("reset on connect by role %q", user))
		if err == nil {
			m.cfg.Metrics.action("reset", "on_connect")
			m.cfg.Metrics.took("reset", time.Since(start))
		}
		return err
	})
}

// wakeLocked starts b's stopped server for a client. m.mu is held.
func (m *Manager) wakeLocked(b *branch, k key) *op {
	return m.startOp(b, "wake", func(ctx context.Context) error {
		start := time.Now()
		err := m.startServer(ctx, b)
		if err == nil {
			m.cfg.Metrics.action("wake", "connection")
			m.cfg.Metrics.took("wake", time.Since(start))
			m.log.Info("branch woken", zap.String("source", k.source), zap.String("branch", k.name), zap.Duration("took", time.Since(start)))
		}
		return err
	})
}

// quotaError says what happens to a branch over its quota.
func (m *Manager) quotaError(b *branch) error {
	quota := b.rec.Quota
	if quota == 0 {
		quota = m.cfg.Policy.Quota
	}
	then := "it will be reset to its base when its last session ends"
	if m.cfg.Policy.QuotaPolicy == QuotaRefuse {
		then = "it refuses new sessions until it is reset or destroyed"
	}
	return &QuotaError{Branch: b.rec.Name, Owned: b.rec.OwnedBytes, Quota: quota, Then: then}
}

// QuotaError is returned for a session on a branch over its disk quota. It matches
// ErrQuota with errors.Is, and its message is fit for the client.
type QuotaError struct {
	Branch       string
	Owned, Quota int64
	Then         string // what will happen to the branch
}

func (e *QuotaError) Error() string {
	owned, quota := mib(e.Owned), mib(e.Quota)
	if owned == quota { // less than 0.05 MiB over: in bytes, which tell them apart
		owned, quota = fmt.Sprintf("%d bytes", e.Owned), fmt.Sprintf("%d bytes", e.Quota)
	}
	return fmt.Sprintf("branch %q is over its disk quota: it owns %s of %s; %s", e.Branch, owned, quota, e.Then)
}

// mib writes n bytes in MiB with a decimal, so that a branch a little over a quota
// of a few MiB is not told it owns "1 MiB of 1 MiB".
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// Is makes errors.Is(err, ErrQuota) hold.
func (e *QuotaError) Is(target error) bool { return target == ErrQuota }

// SQLState, ClientMessage, ClientHint and Rank tell a client what ErrQuota does,
// in words that name the branch and its usage.
func (e *QuotaError) SQLState() string      { return ErrQuota.SQLState() }
func (e *QuotaError) ClientMessage() string { return e.Error() }
func (e *QuotaError) ClientHint() string    { return ErrQuota.ClientHint() }
func (e *QuotaError) Rank() int             { return ErrQuota.Rank() }

// roomLocked makes room for one more running branch under MaxRunning: it starts
// stopping the least recently used idle one and returns that operation to wait for,
// or ErrTooMany when every running branch has sessions. m.mu is held.
func (m *Manager) roomLocked() (*op, error) {
	limit := m.cfg.Policy.MaxRunning
	if limit <= 0 {
		return nil, nil
	}
	if m.runningLocked() < limit {
		return nil, nil
	}
	for _, k := range m.running.Keys() { // pool members and ended ephemeral branches go first
		b := m.branches[k]
		if b != nil && (b.rec.Pooled || b.ended()) && b.op == nil {
			reason := "max running: warm pool member makes room"
			if b.ended() {
				reason = "max running: ephemeral branch whose last session ended makes room"
			}
			m.cfg.Metrics.action("evict", "max_running")
			return m.startOp(b, "destroy", func(ctx context.Context) error {
				return m.destroyBranch(ctx, b, reason)
			}), nil
		}
	}
	var leaving *op                      // a server already on its way out: wait for it rather than refuse
	for _, k := range m.running.Keys() { // least recently used first
		b := m.branches[k]
		if b != nil && b.op != nil && (b.op.what == "stop" || b.op.what == "destroy") && leaving == nil {
			leaving = b.op
		}
		if b == nil || b.op != nil || b.sessions > 0 || b.inst == nil {
			continue
		}
		m.cfg.Metrics.action("evict", "max_running")
		return m.startOp(b, "stop", func(ctx context.Context) error {
			return m.stopBranch(ctx, b, "max running: least recently used idle branch")
		}), nil
	}
	if leaving != nil {
		return leaving, nil
	}
	return nil, fmt.Errorf("%w: all %d running branches have sessions", ErrTooMany, limit)
}

// overBudgetLocked reports whether branches own more than the disk budget allows.
// m.mu is held.
func (m *Manager) overBudgetLocked() bool {
	p := m.cfg.Policy
	return p.DiskBudget > 0 && m.ownedTotal+p.DiskReserve > p.DiskBudget
}

// makeBudgetRoom runs a reaper pass, which evicts idle branches to fit the disk
// budget, and refuses a new branch if that was not enough. m.mu is not held.
func (m *Manager) makeBudgetRoom(ctx context.Context) error {
	m.reapPass(ctx, passBudget)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.overBudgetLocked() {
		return nil
	}
	p := m.cfg.Policy
	return fmt.Errorf("%w: branches own %s of the %s budget (%s reserved) and none can be evicted",
		ErrDiskFull, mib(m.ownedTotal), mib(p.DiskBudget), mib(p.DiskReserve))
}

// newBranchLocked prepares the record of a branch about to be created. m.mu is held.
func (m *Manager) newBranchLocked(k key, route router.Route) (*branch, error) {
	s := m.sources[k.source]
	if s == nil {
		return nil, fmt.Errorf("source %q: %w", k.source, ErrNotFound)
	}
	if s.seed == nil {
		return nil, fmt.Errorf("source %q: %w (its seed is still being built)", k.source, ErrNotReady)
	}
	rec := catalog.Branch{
		Source:    k.source,
		Name:      k.name,
		SeedID:    s.seed.ID,
		Layers:    []string{m.seedLayer(*s.seed)},
		State:     catalog.Creating,
		TTL:       route.Options.TTL,
		Ephemeral: route.Options.Ephemeral,
		Quota:     route.Options.Quota,
	}
	if from := route.Options.From; from != "" {
		if from == k.name {
			return nil, fmt.Errorf("%w: branch %q cannot be its own parent", ErrInvalid, from)
		}
		if p := m.branches[key{k.source, from}]; p == nil || p.ended() {
			return nil, fmt.Errorf("parent branch %q of source %q: %w", from, k.source, ErrNotFound)
		}
		rec.Parent = from
	}
	return &branch{rec: rec}, nil
}

func noSessions(b *branch) error {
	if b.sessions > 0 {
		return fmt.Errorf("branch %q: %w (%d)", b.rec.Name, ErrBusy, b.sessions)
	}
	return nil
}

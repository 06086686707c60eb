package branches

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/failpoint"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"go.uber.org/zap"
)

// The warm pool. Each source keeps Warm branches of its newest seed generation
// created and running, under placeholder names no client can write (they start with
// '_'). A connection to a branch name never seen claims one: one catalog transaction
// gives it the name and the connection's options, and a refill brings the pool back
// to size in the background. Members count against MaxRunning and the disk budget
// and are the first to go when room is needed; members of an older generation, or
// that stopped, are replaced.

// Prewarmer opens server sessions on a pooled branch ahead of its first client, so
// that a claim needs no backend fork either. The proxy implements it.
type Prewarmer interface {
	// Open starts a server session for a startup key on the server dial reaches.
	Open(ctx context.Context, dial func(context.Context) (net.Conn, error), key string) (io.Closer, error)
	// UserKeys returns the startup keys of the sessions opened for every pooled
	// branch whatever clients did (serve's --warm-user), for the source's database.
	UserKeys(database string) []string
}

// poolPrefix starts the names of pool members: '_' is never in a branch name.
const poolPrefix = "_pool-"

// warmLocked is how many members source s keeps: its setting, or the server's, or
// what its holds ask for if more. m.mu is held.
func (m *Manager) warmLocked(s *sourceState) int {
	if m.cat.Draining() {
		return 0 // a drained node takes no new branch: its pool empties
	}
	want := m.cfg.Warm
	if s.src.Warm >= 0 {
		want = s.src.Warm
	}
	if len(s.holds) > 0 {
		want = max(want, heldLocked(s, time.Now()))
	}
	return want
}

// claimLocked gives key k a running member of its source's pool, renaming it and
// applying the route's options; it returns the claim operation to wait for, or nil
// when there is no member to claim (a branch from a parent is never pooled) or a
// claim for this connection failed already (tried). m.mu is held.
func (m *Manager) claimLocked(k key, route router.Route, tried bool) *op {
	s := m.sources[k.source]
	if tried || s == nil || s.seed == nil || route.Options.From != "" || m.warmLocked(s) == 0 {
		return nil
	}
	var member *branch
	var mk key
	for pk, b := range m.branches {
		if pk.source == k.source && b.rec.Pooled && b.op == nil && b.inst != nil &&
			b.rec.State == catalog.Running && b.rec.SeedID == s.seed.ID {
			member, mk = b, pk
			break
		}
	}
	if member == nil {
		m.cfg.Metrics.poolEvent("miss")
		go m.refillPools()
		return nil
	}
	prev := member.rec
	now := m.now()
	s.pace.claimed(now.Sub(s.lastClaim))
	s.lastClaim = now
	delete(m.branches, mk)
	m.running.Remove(mk)
	id := member.rec.ID
	cl := catalog.Claim{Name: k.name, TTL: route.Options.TTL, Ephemeral: route.Options.Ephemeral,
		Quota: route.Options.Quota, At: m.now()}
	member.rec.Name, member.rec.Pooled, member.rec.HadSession = cl.Name, false, true
	member.rec.TTL, member.rec.Ephemeral, member.rec.Quota, member.rec.LastUsedAt = cl.TTL, cl.Ephemeral, cl.Quota, cl.At
	// Nobody has logged in to a member: its roles are the ones read when it
	// started. Reading them again waits rolesEvery, not for the first pass after
	// this use, so that a short test on a claimed branch pays no backend start
	// for it.
	member.rolesAt = now
	member.renewIdleLocked(now)
	s.use.claimed(member)
	m.branches[k] = member
	m.running.Add(k, struct{}{})
	return m.startOp(member, "claim", func(ctx context.Context) error {
		err := m.fault(failpoint.Catalog+"claimed", member)
		if err == nil {
			// Not cancelled with the connection: a claim cut short at its COMMIT is
			// one whose outcome ClaimBranch must read back.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(m.cfg.CreateTimeout, claimReadBack))
			err = m.cat.ClaimBranch(cctx, id, cl, "claimed by a connection")
			cancel()
		}
		if errors.Is(err, catalog.ErrClaimUnknown) {
			// The catalog may hold the member under either name: keep it out of the
			// client's hands, and let the pool's refill replace it once the catalog
			// answers (a destroy goes by id, whatever its name).
			m.log.Error("claim pooled branch", zap.String("source", k.source), zap.String("branch", k.name), zap.Error(err))
			prev.SeedID = 0 // stale: never claimed again, destroyed by the next refill
			m.unclaim(k, mk, member, prev)
			m.refillSoon()
			return fmt.Errorf("%w for %q: %w", errClaimFailed, k.name, err)
		}
		if errors.Is(err, catalog.ErrExists) || errors.Is(err, catalog.ErrDraining) {
			// The name is another node's, or this node was drained meanwhile: the
			// member is as it was, back in the pool (a drained node's refill
			// removes it).
			m.unclaim(k, mk, member, prev)
			m.refillSoon()
			return fmt.Errorf("%w for %q: %w", errClaimFailed, k.name, err)
		}
		if err != nil {
			m.log.Error("claim pooled branch", zap.String("source", k.source), zap.String("branch", k.name), zap.Error(err))
			m.unclaim(k, mk, member, prev)
			if derr := m.destroyBranch(ctx, member, "claim failed"); derr != nil {
				m.log.Error("destroy pooled branch after a failed claim", zap.Error(derr))
			}
			m.refillSoon()
			return fmt.Errorf("%w for %q: %w", errClaimFailed, k.name, err)
		}
		m.markPersisted(member, cl.At)
		m.renameServer(member, k)
		m.autovacuumLater(member)
		m.cfg.Metrics.poolEvent("claim")
		m.log.Info("branch claimed from the warm pool", zap.String("source", k.source), zap.String("branch", k.name))
		m.refillSoon()
		return nil
	})
}

// claimReadBack bounds how long a claim cut short at its COMMIT waits for the
// catalog to say whether it was recorded; the connection goes on to a cold create.
const claimReadBack = 10 * time.Second

// unclaim puts a member whose claim the catalog did not record back as it was, under
// its pool name mk: the catalog still has it so, and the claiming connection must not
// find it under k whatever happens to it next.
func (m *Manager) unclaim(k, mk key, member *branch, prev catalog.Branch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.branches[k] == member {
		delete(m.branches, k)
		m.running.Remove(k)
	}
	member.rec = prev
	m.branches[mk] = member
	if member.inst != nil {
		m.running.Add(mk, struct{}{})
	}
}

// errClaimFailed: recording a claim failed and the member was destroyed; the
// connection that claimed it goes on to a cold create, which reports its own error.
var errClaimFailed = errors.New("claim a pooled branch")

// markPersisted notes that the catalog has b's last use as of t.
func (m *Manager) markPersisted(b *branch, t time.Time) {
	m.mu.Lock()
	if b.persistedUse.Before(t) {
		b.persistedUse = t
	}
	m.mu.Unlock()
}

// claimRefillDelay is how long a refill waits after a claim: the client that claimed
// a member runs its first queries now, and a server start beside them would slow
// them; claims within the delay share one refill.
const claimRefillDelay = 200 * time.Millisecond

// refillSoon refills the pools after claimRefillDelay, once for every claim made
// meanwhile.
func (m *Manager) refillSoon() { afterClaims(&m.refillDue, m.refillPools) }

// afterClaims runs fn after claimRefillDelay, once for every call made meanwhile
// (due says that a run is scheduled).
func afterClaims(due *atomic.Bool, fn func()) {
	if due.CompareAndSwap(false, true) {
		time.AfterFunc(claimRefillDelay, func() {
			due.Store(false)
			fn()
		})
	}
}

// refillNow reports whether a pool that has have of its want members (fewer) should
// start creating more now, sinceClaim after its last claim. While claims keep coming
// (a test suite's burst, a fan-out), server starts would take the cores from the
// claimed branches' first queries, so the pool waits until claims pause for
// claimRefillDelay, unless it is down to its reserve: the members the burst will
// claim while new ones are made (poolPace.reserve).
func refillNow(have, reserve int, sinceClaim time.Duration) bool {
	return sinceClaim >= claimRefillDelay || have <= reserve
}

// refillPools brings every source's pool to its size: stale members (an older
// generation, stopped, or beyond the size) are destroyed and new ones created, as
// long as MaxRunning and the disk budget leave room. Creations of pool members are
// bounded by half of MaxCreating (at least one), so clients' creations keep slots.
func (m *Manager) refillPools() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.cat.NodeLost() { // a lost node creates nothing (node.go)
		return
	}
	refilling := 0
	for _, b := range m.branches {
		if b.rec.Pooled && b.op != nil && b.op.what == "create" {
			refilling++
		}
	}
	maxRefill := max(1, m.cfg.MaxCreating/2)
	for name, s := range m.sources {
		want, have := m.warmLocked(s), 0
		for k, b := range m.branches {
			if k.source != name || !b.rec.Pooled || b.op != nil {
				if k.source == name && b.rec.Pooled && b.op != nil && b.op.what == "create" {
					have++
				}
				continue
			}
			if s.seed == nil || b.rec.SeedID != s.seed.ID || b.inst == nil || have >= want {
				m.startOp(b, "destroy", func(ctx context.Context) error { return m.destroyBranch(ctx, b, "warm pool: replaced") })
				continue
			}
			have++
		}
		if have < want && !refillNow(have, s.pace.reserve(want), m.now().Sub(s.lastClaim)) {
			m.refillSoon() // claims are coming in: their clients' queries go first
			continue
		}
		for ; have < want && s.seed != nil && refilling < maxRefill && m.poolRoomLocked(); have++ {
			if err := m.newMemberLocked(name, s); err != nil {
				m.log.Warn("warm pool", zap.String("source", name), zap.Error(err))
				break
			}
			refilling++
		}
	}
}

// poolRoomLocked reports whether one more running branch fits without evicting
// anyone: pool members never push out branches that clients use. m.mu is held.
func (m *Manager) poolRoomLocked() bool {
	if m.overBudgetLocked() {
		return false
	}
	limit := m.cfg.Policy.MaxRunning
	if limit <= 0 {
		return true
	}
	return m.runningLocked() < limit
}

// runningLocked counts branches that run or are about to. m.mu is held.
func (m *Manager) runningLocked() int {
	n := 0
	for _, b := range m.branches {
		if b.inst != nil || (b.op != nil && (b.op.what == "create" || b.op.what == "wake")) {
			n++
		}
	}
	return n
}

// newMemberLocked starts creating one pool member of source s. m.mu is held.
func (m *Manager) newMemberLocked(source string, s *sourceState) error {
	var rnd [6]byte
	rand.Read(rnd[:])
	k := key{source, poolPrefix + hex.EncodeToString(rnd[:])}
	if m.branches[k] != nil {
		return fmt.Errorf("pool name %q taken", k.name)
	}
	b := &branch{rec: catalog.Branch{Source: source, Name: k.name, SeedID: s.seed.ID, Layers: []string{m.seedLayer(*s.seed)},
		State: catalog.Creating, Pooled: true}}
	m.branches[k] = b
	o := m.startOp(b, "create", func(ctx context.Context) error {
		start := time.Now()
		if err := m.create(ctx, b, "warm pool"); err != nil {
			return err
		}
		m.prewarm(ctx, b, false)
		took := time.Since(start)
		m.cfg.Metrics.took("pool_refill", took)
		m.mu.Lock()
		s.pace.filled(took)
		m.mu.Unlock()
		return nil
	})
	go func() {
		// Once the operation has ended (its slot is free), fill the pool on rather
		// than at the next reaper pass; a failed creation waits for that pass.
		<-o.done
		if o.err == nil {
			m.refillPools()
		}
	}()
	return nil
}

// prewarm opens server sessions on a new pool member for the startup keys its
// source's clients used most, and for the --warm-user keys, and parks them. With
// missing, only for the keys it has no session parked for, and only while it is
// still in the pool (prewarm_late.go).
func (m *Manager) prewarm(ctx context.Context, b *branch, missing bool) {
	pw := m.cfg.Prewarm
	if pw == nil || m.cfg.MaxIdleServers == 0 {
		return
	}
	m.mu.Lock()
	source, name, inst := b.rec.Source, b.rec.Name, b.inst
	var keys []string
	ahead := maxAhead
	if s := m.sources[source]; s != nil {
		keys = append(topKeys(s.keys, prewarmKeys), pw.UserKeys(s.clientDatabase())...)
		ahead = s.use.ahead()
	}
	m.mu.Unlock()
	if inst == nil {
		return
	}
	socket := inst.SocketPath()
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}
	seen := map[string]bool{}
	for i, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		n := 1
		if i == 0 {
			n = ahead
		}
		for j := range n {
			if missing && !m.lacksKey(b, inst, k, j) {
				break
			}
			c, err := pw.Open(ctx, dial, k)
			if err != nil {
				m.log.Warn("open a server session ahead", zap.String("branch", name), zap.Error(err))
				return
			}
			if !m.park(b, inst, k, c, missing) {
				c.Close()
				return
			}
		}
	}
}

// clientDatabase is the database a source's clients most likely connect to: its
// default database, else the one database of its seed that initdb did not make,
// else the database named like the source, else postgres.
func (s *sourceState) clientDatabase() string {
	if s.src.DefaultDatabase != "" || s.seed == nil {
		return s.src.DefaultDatabase
	}
	var own []string
	for _, db := range s.seed.Databases {
		if db != "postgres" && db != "template0" && db != "template1" {
			own = append(own, db)
		}
	}
	switch {
	case len(own) == 1:
		return own[0]
	case slices.Contains(own, s.src.Name):
		return s.src.Name
	}
	return "postgres"
}

// prewarmKeys is how many of the most used startup keys a pool member opens.
const prewarmKeys = 3

// park parks c, a session opened ahead on inst, on b if b still runs on inst and
// has room; late (prewarm_late.go) also asks that b still be an idle pool member.
func (m *Manager) park(b *branch, inst runtime.Instance, k string, c io.Closer, late bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b.inst == nil || b.inst != inst || b.idleCount >= m.cfg.MaxIdleServers {
		return false
	}
	if late && !m.lateMemberLocked(b) {
		return false // claimed, or an operation (a stop, a destroy) began meanwhile
	}
	b.addIdleLocked(k, c, m.now())
	return true
}

// topKeys returns up to n keys with the highest counts, highest first.
func topKeys(counts map[string]int, n int) []string {
	var out []string
	for len(out) < n {
		best, bestN := "", 0
		for k, c := range counts {
			if (c > bestN || c == bestN && k < best) && !slices.Contains(out, k) {
				best, bestN = k, c
			}
		}
		if bestN == 0 {
			break
		}
		out = append(out, best)
	}
	return out
}

// SetWarm sets how many pooled branches a source keeps; -1 returns it to the
// server's default.
func (m *Manager) SetWarm(ctx context.Context, source string, warm int) error {
	if warm < -1 {
		return fmt.Errorf("%w: warm %d: want 0 or more (or -1 for the server's default)", ErrInvalid, warm)
	}
	if err := m.cat.SetSourceWarm(ctx, source, warm); err != nil {
		return fmt.Errorf("source %q: %w", source, ErrNotFound)
	}
	m.mu.Lock()
	if s := m.sources[source]; s != nil {
		s.src.Warm = warm
	}
	m.mu.Unlock()
	m.refillPools()
	return nil
}

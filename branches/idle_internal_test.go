package branches

import (
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"sync/atomic"
	"testing"
	"time"
)

// closeCounter counts its closes.
type closeCounter struct{ n *atomic.Int32 }

func (c closeCounter) Close() error { c.n.Add(1); return nil }

// Sessions parked past ServerIdleTimeout are closed, except on pool members: those
// were opened ahead for a first client that may come much later.
func TestExpireIdleKeepsPoolMembers(t *testing.T) {
	t.Parallel()
	m := &Manager{cfg: Config{ServerIdleTimeout: time.Minute}, branches: map[key]*branch{}}
	long := m.now().Add(-2 * time.Minute)
	var used, pooled atomic.Int32
	b := &branch{}
	b.addIdleLocked("k", closeCounter{&used}, long)
	b.addIdleLocked("k", closeCounter{&used}, m.now())
	p := &branch{}
	p.rec.Pooled = true
	p.addIdleLocked("k", closeCounter{&pooled}, long)
	m.branches[key{"s", "used"}] = b
	m.branches[key{"s", "_pool-1"}] = p
	m.expireIdle()
	if used.Load() != 1 || b.idleCount != 1 {
		t.Errorf("a branch's sessions: %d closed, %d left, want the old one closed and the new one left", used.Load(), b.idleCount)
	}
	if pooled.Load() != 0 || p.idleCount != 1 {
		t.Errorf("a pool member's session opened ahead: %d closed, %d left, want it kept", pooled.Load(), p.idleCount)
	}
}

// A server session whose client's lease came before DropAllIdle is closed, not
// parked: it may hold the database a DROP DATABASE waits for, or settings an
// ALTER ROLE … SET changed. A lease given after it parks as before.
func TestDropAllIdleEndsEarlierSessions(t *testing.T) {
	t.Parallel()
	m := &Manager{cfg: Config{MaxIdleServers: 8}, branches: map[key]*branch{}}
	var inst runtime.Instance = fakeInstance{}
	b := &branch{inst: inst}
	lease := func() *Lease { return &Lease{m: m, b: b, use: leaseUse{inst: inst}, idleEpoch: b.idleEpoch} }
	var parkedBefore, early, late atomic.Int32
	b.addIdleLocked("k", closeCounter{&parkedBefore}, m.now())
	a, d := lease(), lease()
	d.DropAllIdle()
	c := lease()
	a.Park("k", closeCounter{&early})
	d.Park("k", closeCounter{&early})
	c.Park("k", closeCounter{&late})
	if parkedBefore.Load() != 1 || early.Load() != 2 || late.Load() != 0 || b.idleCount != 1 {
		t.Errorf("closed: %d parked before, %d of the leases before, %d of the lease after; %d parked; want 1, 2, 0 and 1",
			parkedBefore.Load(), early.Load(), late.Load(), b.idleCount)
	}
}

// fakeInstance is a server that is there.
type fakeInstance struct{ runtime.Instance }

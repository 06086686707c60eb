package branches

import (
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

package branches

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"go.uber.org/zap"
)

// leaseUse is how a lease counts as a use of its branch. A session that could not
// reach the branch's server is no use: it must not put off the idle stop that would
// repair the branch, nor its TTL.
type leaseUse struct {
	prev   time.Time   // the branch's last use before this lease
	at     time.Time   // the last use this lease recorded when it was acquired
	failed atomic.Bool // Dial failed
	inst   runtime.Instance
}

// release records the end of the lease's session at now. m.mu is held.
func (u *leaseUse) release(b *branch, now time.Time) {
	if !u.failed.Load() {
		b.rec.LastUsedAt = now
		return
	}
	if b.rec.LastUsedAt.Equal(u.at) {
		b.rec.LastUsedAt = u.prev // no session used it since
	}
}

// errServerAlive: a dial failed but the server has not exited; nothing to revive.
var errServerAlive = errors.New("branch server has not exited")

// revive starts the server of a leased branch again when the server the lease was
// given (inst) exited before the session could dial it, and returns the new socket.
// The lease's session count keeps the branch from being stopped meanwhile.
func (m *Manager) revive(ctx context.Context, b *branch, inst runtime.Instance) (string, error) {
	if inst == nil {
		return "", errServerAlive
	}
	select {
	case <-inst.Done():
	case <-time.After(time.Second): // a server that refuses connections but runs
		return "", errServerAlive
	case <-ctx.Done():
		return "", ctx.Err()
	}
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return "", ErrClosed
		}
		var o *op
		switch {
		case m.branches[key{b.rec.Source, b.rec.Name}] != b:
			// Destroyed under its sessions (Destroy with Force): nothing to wake.
			m.mu.Unlock()
			return "", fmt.Errorf("branch %q: %w", b.rec.Name, ErrEnded)
		case b.op != nil:
			o = b.op
		case b.fenced: // stopped because the catalog no longer vouches for it (fence.go)
			m.mu.Unlock()
			return "", m.fencedErr(b.rec.Name)
		case serverExited(b):
			o = m.recordExitLocked(b)
		case b.inst != nil:
			sock := b.inst.SocketPath()
			m.mu.Unlock()
			return sock, nil
		default:
			o = m.startOp(b, "wake", func(ctx context.Context) error { return m.startServer(ctx, b) })
		}
		m.mu.Unlock()
		if err := wait(ctx, o); err != nil {
			return "", err
		}
		if o.what == "stop" {
			// Stopped under the lease (Stop with Force, as no other stop starts
			// while a branch has sessions): the session ends, the branch stays
			// stopped.
			return "", fmt.Errorf("branch %q: %w", b.rec.Name, ErrEnded)
		}
	}
}

// firstSessionWait bounds the catalog write of a branch's first session, which a
// connection waits for: an unavailable catalog must not hold the session longer.
const firstSessionWait = time.Second

// recordPastSessions records in the catalog that branch b, about to be made
// ephemeral, has had sessions, if it has: only an ephemeral branch's are recorded
// as they come, and a restart must not take the end of its next session for its
// first (reconcile). It is written before the ephemeral mark, so that no crash
// leaves the mark without it.
func (m *Manager) recordPastSessions(ctx context.Context, b *branch) error {
	m.mu.Lock()
	todo, id, name := b.hadSession && !b.rec.HadSession, b.rec.ID, b.rec.Name
	m.mu.Unlock()
	if !todo {
		return nil
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), catalogWriteTimeout)
	defer cancel()
	if err := m.cat.MarkHadSession(wctx, id); err != nil {
		return m.writeFailed(ctx, b, name, err)
	}
	m.mu.Lock()
	if b.rec.ID == id {
		b.rec.HadSession = true
	}
	m.mu.Unlock()
	return nil
}

// recordFirstSession records in the catalog that branch b (id), ephemeral, has had
// a session, at its first lease (a claim recorded it already), so that a run after a crash
// knows that an ephemeral branch's sessions have ended rather than not begun
// (reconcile). b.rec.HadSession is already set, so that concurrent leases do not
// write it twice; a failed write clears it again, for the next lease to retry.
func (m *Manager) recordFirstSession(ctx context.Context, b *branch, id int64, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), firstSessionWait)
	defer cancel()
	err := m.cat.MarkHadSession(ctx, id)
	if err == nil {
		return
	}
	m.log.Warn("could not record a branch's first session", zap.String("branch", name), zap.Error(err))
	m.mu.Lock()
	if b.rec.ID == id {
		b.rec.HadSession = false
	}
	m.mu.Unlock()
}

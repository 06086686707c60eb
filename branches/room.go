package branches

import (
	"context"
	"time"
)

// roomWait is how long a connection that finds every running branch busy under
// MaxRunning waits for one to become idle before it gets ErrTooMany: sessions end
// and operations finish all the time, and a client that has just closed its last
// session is often not yet seen to have left.
const roomWait = 5 * time.Second

// roomSignalLocked returns a channel closed the next time something that can free
// room under MaxRunning happens: a session ends or an operation finishes. m.mu is
// held.
func (m *Manager) roomSignalLocked() <-chan struct{} {
	if m.roomFreed == nil {
		m.roomFreed = make(chan struct{})
	}
	return m.roomFreed
}

// signalRoomLocked wakes whoever waits for room. m.mu is held.
func (m *Manager) signalRoomLocked() {
	if m.roomFreed != nil {
		close(m.roomFreed)
		m.roomFreed = nil
	}
}

// waitRoom waits for signal, until *deadline (set to roomWait from now on the first
// call) or ctx ends; it reports whether the caller should look again.
func waitRoom(ctx context.Context, signal <-chan struct{}, deadline *time.Time) bool {
	if deadline.IsZero() {
		*deadline = time.Now().Add(roomWait)
	}
	left := time.Until(*deadline)
	if left <= 0 {
		return false
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-signal:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

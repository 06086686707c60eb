package branches

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// Holds on a source's warm pool. A test binary wants the pool deep while its tests
// run and as it was afterwards (pgbranchtest.Warm); binaries that run at once (go
// test ./...) must not undo each other, and one that dies must not leave the pool
// deep for good. A hold asks for at least n members until it is released or its
// TTL has passed; the pool keeps as many as the source's setting or its largest
// live hold asks for. Holds are kept in memory: a restart drops them, which makes
// pools shallower, never deeper.

// MaxWarmHold bounds a hold's TTL.
const MaxWarmHold = 24 * time.Hour

// warmHold is one hold: n members until until.
type warmHold struct {
	n     int
	until time.Time
	timer *time.Timer // refills the pools once the hold has passed
}

// HoldWarm has source's pool keep at least n members until the hold is released
// (ReleaseWarm) or ttl has passed, and returns the hold's id.
func (m *Manager) HoldWarm(ctx context.Context, source string, n int, ttl time.Duration) (string, error) {
	if n < 0 || ttl <= 0 || ttl > MaxWarmHold {
		return "", fmt.Errorf("%w: hold of %d members for %s: want 0 or more, for at most %s", ErrInvalid, n, ttl, MaxWarmHold)
	}
	var b [8]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	m.mu.Lock()
	s := m.sources[source]
	if s == nil {
		m.mu.Unlock()
		return "", fmt.Errorf("source %q: %w", source, ErrNotFound)
	}
	if s.holds == nil {
		s.holds = map[string]warmHold{}
	}
	// Once it has passed, the members it alone kept go.
	s.holds[id] = warmHold{n: n, until: time.Now().Add(ttl), timer: time.AfterFunc(ttl, m.refillPools)}
	m.mu.Unlock()
	m.refillPools()
	return id, nil
}

// ReleaseWarm ends a hold; the members it alone kept go.
func (m *Manager) ReleaseWarm(ctx context.Context, source, id string) error {
	m.mu.Lock()
	s := m.sources[source]
	h, ok := s.holdsOrNil()[id]
	if ok {
		h.timer.Stop()
		delete(s.holds, id)
	}
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("hold %q on source %q: %w", id, source, ErrNotFound)
	}
	m.refillPools()
	return nil
}

// holdsOrNil is s's holds, nil for no source.
func (s *sourceState) holdsOrNil() map[string]warmHold {
	if s == nil {
		return nil
	}
	return s.holds
}

// heldLocked is how many members s's live holds ask for; it forgets those that
// have passed. m.mu is held.
func heldLocked(s *sourceState, now time.Time) int {
	n := 0
	for id, h := range s.holds {
		if !now.Before(h.until) {
			delete(s.holds, id)
			continue
		}
		n = max(n, h.n)
	}
	return n
}

package branches

import (
	"io"
	"time"
)

// Idle server sessions. The session layer (the proxy) resets a server session that
// a client left idle and parks it on its branch, keyed by the startup parameters
// that shaped it; the next client with the same key takes it instead of starting a
// backend. The engine does not speak the protocol: it only keeps, counts, expires
// and closes what it is given. Parked sessions are not sessions of the branch: the
// reaper's decisions see clients only, and every operation that stops, resets,
// forks or destroys a branch closes its parked sessions first.

// parkedConn is one parked server session.
type parkedConn struct {
	c     io.Closer
	since time.Time
}

// TakeIdle returns a server session parked on the lease's branch under key, the most
// recently parked first, or nil. The caller checks that it is still alive.
func (l *Lease) TakeIdle(key string) io.Closer {
	m := l.m
	m.mu.Lock()
	defer m.mu.Unlock()
	m.wantKeyLocked(l.b.rec.Source, key)
	list := l.b.idle[key]
	if len(list) == 0 {
		return nil
	}
	p := list[len(list)-1]
	if len(list) == 1 {
		delete(l.b.idle, key)
	} else {
		l.b.idle[key] = list[:len(list)-1]
	}
	l.b.idleCount--
	return p.c
}

// Park parks c, the reset and idle server session of the lease's session, under key
// on the branch, when the branch keeps running on the server the lease was given,
// has room, and has not dropped its parked sessions since the lease was given
// (DropAllIdle); otherwise c is closed. It is called after Release: the session ended
// when the client left, so operations waiting for the branch's sessions to end do
// not wait for the reset that comes before Park.
func (l *Lease) Park(key string, c io.Closer) {
	m := l.m
	m.mu.Lock()
	b := l.b
	keep := !m.closed && m.cfg.MaxIdleServers > 0 && b.inst != nil && b.inst == l.use.inst && b.op == nil &&
		!b.overQuota && !(b.rec.Ephemeral && b.sessions == 0) && l.idleEpoch == b.idleEpoch
	var evicted io.Closer
	if keep {
		if b.idleCount >= m.cfg.MaxIdleServers {
			evicted = b.popOldestIdleLocked(nil)
		}
		b.addIdleLocked(key, c, m.now())
	}
	m.mu.Unlock()
	if !keep {
		c.Close()
	}
	if evicted != nil {
		evicted.Close()
	}
}

// addIdleLocked parks c under key. m.mu is held.
func (b *branch) addIdleLocked(key string, c io.Closer, now time.Time) {
	if b.idle == nil {
		b.idle = map[string][]parkedConn{}
	}
	b.idle[key] = append(b.idle[key], parkedConn{c: c, since: now})
	b.idleCount++
}

// popOldestIdleLocked removes the longest-parked session whose key match accepts
// (nil: any). m.mu is held.
func (b *branch) popOldestIdleLocked(match func(key string) bool) io.Closer {
	var oldKey string
	var oldest time.Time
	for k, list := range b.idle {
		if match != nil && !match(k) {
			continue
		}
		if t := list[0].since; oldKey == "" || t.Before(oldest) {
			oldKey, oldest = k, t
		}
	}
	if oldKey == "" {
		return nil
	}
	list := b.idle[oldKey]
	c := list[0].c
	if len(list) == 1 {
		delete(b.idle, oldKey)
	} else {
		b.idle[oldKey] = list[1:]
	}
	b.idleCount--
	return c
}

// renewIdleLocked counts the sessions parked on b as parked at now: a claimed pool
// member's sessions opened ahead are its new client's, whenever they were opened.
func (b *branch) renewIdleLocked(now time.Time) {
	for _, list := range b.idle {
		for i := range list {
			list[i].since = now
		}
	}
}

// takeAllIdleLocked removes every session parked on b, for the caller to close
// once m.mu is released.
func (b *branch) takeAllIdleLocked() []io.Closer {
	var all []io.Closer
	for _, list := range b.idle {
		for _, p := range list {
			all = append(all, p.c)
		}
	}
	b.idle, b.idleCount = nil, 0
	return all
}

// takeExpiredIdleLocked removes the sessions parked on b since before cutoff.
func (b *branch) takeExpiredIdleLocked(cutoff time.Time) []io.Closer {
	var out []io.Closer
	for k, list := range b.idle {
		i := 0
		for i < len(list) && list[i].since.Before(cutoff) {
			out = append(out, list[i].c)
			i++
		}
		switch {
		case i == len(list):
			delete(b.idle, k)
		case i > 0:
			b.idle[k] = list[i:]
		}
		b.idleCount -= i
	}
	return out
}

// closeIdle closes every server session parked on b. Operations that stop, reset,
// fork or destroy a branch call it first, so parked sessions never delay them.
func (m *Manager) closeIdle(b *branch) {
	m.mu.Lock()
	all := b.takeAllIdleLocked()
	m.mu.Unlock()
	closeAll(all)
}

// expireIdle closes parked sessions older than Config.ServerIdleTimeout. A pool
// member's are kept: they were opened ahead for its first client, which may come
// long after (the member itself runs for it meanwhile), and they are few.
func (m *Manager) expireIdle() {
	if m.cfg.ServerIdleTimeout <= 0 {
		return
	}
	cutoff := m.now().Add(-m.cfg.ServerIdleTimeout)
	var all []io.Closer
	m.mu.Lock()
	for _, b := range m.branches {
		if !b.rec.Pooled {
			all = append(all, b.takeExpiredIdleLocked(cutoff)...)
		}
	}
	m.mu.Unlock()
	closeAll(all)
}

func closeAll(cs []io.Closer) {
	for _, c := range cs {
		c.Close()
	}
}

// wantKeyLocked counts a startup key that a client of source used, so that pooled
// branches can open server sessions ahead for the keys used most. m.mu is held.
func (m *Manager) wantKeyLocked(source, key string) {
	s := m.sources[source]
	if s == nil {
		return
	}
	if s.keys == nil {
		s.keys = map[string]int{}
	}
	if _, ok := s.keys[key]; ok {
		s.keys[key]++
	} else if len(s.keys) < maxTrackedKeys {
		s.keys[key] = 1
		m.newKeyLocked(s, key) // members made before it was used have no session for it
	}
}

// maxTrackedKeys bounds the startup keys remembered per source.
const maxTrackedKeys = 64

// DropIdle removes the longest-parked server session of the lease's branch whose
// startup key match accepts (nil: any), and returns it for the caller to close,
// or nil. The proxy calls it when the branch's server has no connection slot left
// for a new session: parked sessions hold slots that no client uses.
func (l *Lease) DropIdle(match func(key string) bool) io.Closer {
	m := l.m
	m.mu.Lock()
	defer m.mu.Unlock()
	return l.b.popOldestIdleLocked(match)
}

// DropAllIdle closes every server session parked on the lease's branch, and those
// whose clients are on it now as they end, instead of parking them. The proxy
// calls it when a client sends a statement that needs the branch's other sessions
// gone (DROP DATABASE, CREATE DATABASE … TEMPLATE, ALTER DATABASE … RENAME) or
// whose settings reach only new sessions (ALTER ROLE/DATABASE … SET).
func (l *Lease) DropAllIdle() {
	m := l.m
	m.mu.Lock()
	l.b.idleEpoch++
	all := l.b.takeAllIdleLocked()
	m.mu.Unlock()
	for _, c := range all {
		c.Close()
	}
}

package branches

import (
	"context"
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
}

// Dial connects to the branch server's unix socket.
func (l *Lease) Dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", l.socket)
}

// Release ends the session. It is safe to call more than once.
func (l *Lease) Release() {
	l.once.Do(func() {
		l.m.mu.Lock()
		l.b.sessions--
		l.b.rec.LastUsedAt = l.m.now()
		kick := l.b.sessions == 0 && (l.b.rec.Ephemeral || l.b.overQuota)
		l.m.mu.Unlock()
		if kick {
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
	source, err := router.ResolveSource(route, m.routerSources())
	if err != nil {
		return nil, err
	}
	k := key{source, route.Branch}
	created, resetDone := false, !route.Options.Reset
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, ErrClosed
		}
		b := m.branches[k]
		var o *op
		switch {
		case b == nil:
			if err := m.checkBudgetLocked(ctx); err != nil {
				m.mu.Unlock()
				return nil, err
			}
			if victim, err := m.roomLocked(); err != nil {
				m.mu.Unlock()
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
		case b.overQuota:
			m.mu.Unlock()
			return nil, m.quotaError(b)
		case !resetDone:
			if b.sessions > 0 {
				m.mu.Unlock()
				return nil, fmt.Errorf("%w: cannot reset branch %q: it has %d other sessions", ErrBusy, k.name, b.sessions)
			}
			resetDone = true
			o = m.startOp(b, "reset", func(ctx context.Context) error {
				start := time.Now()
				err := m.resetBranch(ctx, b, "reset on connect")
				if err == nil {
					m.cfg.Metrics.action("reset", "on_connect")
					m.cfg.Metrics.took("reset", time.Since(start))
				}
				return err
			})
		case b.rec.State == catalog.Running && b.inst != nil:
			if max := m.cfg.MaxSessions; max > 0 && b.sessions >= max {
				m.mu.Unlock()
				return nil, fmt.Errorf("%w: branch %q has %d", ErrTooManySessions, k.name, b.sessions)
			}
			b.sessions++
			b.hadSession = true
			b.rec.LastUsedAt = m.now()
			m.running.Get(k)
			l := &Lease{m: m, b: b, socket: b.inst.SocketPath(), Source: source, Branch: route.Branch, Created: created}
			m.mu.Unlock()
			return l, nil
		default:
			if victim, err := m.roomLocked(); err != nil {
				m.mu.Unlock()
				return nil, err
			} else if victim != nil {
				o = victim
				break
			}
			o = m.startOp(b, "wake", func(ctx context.Context) error {
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
		m.mu.Unlock()
		select {
		case <-o.done:
			if o.err != nil {
				return nil, o.err
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("branch %q: %w (%v)", route.Branch, ErrNotReady, context.Cause(ctx))
		}
	}
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
	return fmt.Sprintf("branch %q is over its disk quota: it owns %d MiB of %d MiB; %s", e.Branch, e.Owned>>20, e.Quota>>20, e.Then)
}

// Is makes errors.Is(err, ErrQuota) hold.
func (e *QuotaError) Is(target error) bool { return target == ErrQuota }

// roomLocked makes room for one more running branch under MaxRunning: it starts
// stopping the least recently used idle one and returns that operation to wait for,
// or ErrTooMany when every running branch has sessions. m.mu is held.
func (m *Manager) roomLocked() (*op, error) {
	limit := m.cfg.Policy.MaxRunning
	if limit <= 0 {
		return nil, nil
	}
	running := 0
	for _, b := range m.branches {
		if b.inst != nil || (b.op != nil && (b.op.what == "create" || b.op.what == "wake")) {
			running++
		}
	}
	if running < limit {
		return nil, nil
	}
	for _, k := range m.running.Keys() { // least recently used first
		b := m.branches[k]
		if b == nil || b.op != nil || b.sessions > 0 || b.inst == nil {
			continue
		}
		m.cfg.Metrics.action("evict", "max_running")
		return m.startOp(b, "stop", func(ctx context.Context) error {
			return m.stopBranch(ctx, b, "max running: least recently used idle branch")
		}), nil
	}
	return nil, fmt.Errorf("%w: all %d running branches have sessions", ErrTooMany, limit)
}

// checkBudgetLocked refuses a new branch when the disk budget is spent, after one
// reaper pass has tried to evict idle branches. m.mu is held; it is released and
// retaken around the pass.
func (m *Manager) checkBudgetLocked(ctx context.Context) error {
	p := m.cfg.Policy
	if p.DiskBudget <= 0 || m.ownedTotal+p.DiskReserve <= p.DiskBudget {
		return nil
	}
	m.mu.Unlock()
	m.reapPass(ctx)
	m.mu.Lock()
	if m.ownedTotal+p.DiskReserve <= p.DiskBudget {
		return nil
	}
	return fmt.Errorf("%w: branches own %d MiB of the %d MiB budget (%d MiB reserved) and none can be evicted",
		ErrDiskFull, m.ownedTotal>>20, p.DiskBudget>>20, p.DiskReserve>>20)
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
		Layers:    []string{s.seed.Dir},
		State:     catalog.Creating,
		TTL:       route.Options.TTL,
		Ephemeral: route.Options.Ephemeral,
		Quota:     route.Options.Quota,
	}
	if from := route.Options.From; from != "" {
		if from == k.name {
			return nil, fmt.Errorf("%w: branch %q cannot be its own parent", ErrInvalid, from)
		}
		if m.branches[key{k.source, from}] == nil {
			return nil, fmt.Errorf("parent branch %q of source %q: %w", from, k.source, ErrNotFound)
		}
		rec.Parent = from
	}
	return &branch{rec: rec}, nil
}

// CreateOptions are the settings of a branch created through the admin API.
type CreateOptions struct {
	Source    string        // "" picks the only source
	From      string        // parent branch; "" for the seed
	TTL       time.Duration // 0: the server's default
	Quota     int64         // 0: the server's default
	Ephemeral bool
}

// Create creates a branch without a session and waits until it runs.
func (m *Manager) Create(ctx context.Context, name string, opts CreateOptions) error {
	if !router.ValidBranchName(name) {
		return fmt.Errorf("%w: branch name %q: use 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit", ErrInvalid, name)
	}
	source, err := m.pickSource(opts.Source)
	if err != nil {
		return err
	}
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return ErrClosed
		}
		if _, ok := m.branches[key{source, name}]; ok {
			m.mu.Unlock()
			return fmt.Errorf("branch %q of source %q: %w", name, source, ErrExists)
		}
		if err := m.checkBudgetLocked(ctx); err != nil {
			m.mu.Unlock()
			return err
		}
		victim, err := m.roomLocked()
		if err != nil {
			m.mu.Unlock()
			return err
		}
		if victim != nil {
			m.mu.Unlock()
			if err := wait(ctx, victim); err != nil && ctx.Err() != nil {
				return err
			}
			continue
		}
		nb, err := m.newBranchLocked(key{source, name}, router.Route{Branch: name,
			Options: router.Options{From: opts.From, TTL: opts.TTL, Quota: opts.Quota, Ephemeral: opts.Ephemeral}})
		if err != nil {
			m.mu.Unlock()
			return err
		}
		m.branches[key{source, name}] = nb
		o := m.startOp(nb, "create", func(ctx context.Context) error { return m.create(ctx, nb, "admin create") })
		m.mu.Unlock()
		return wait(ctx, o)
	}
}

// Reset throws the branch's writes away; it refuses a branch with open sessions.
func (m *Manager) Reset(ctx context.Context, source, name string) error {
	source, err := m.sourceOfBranch(source, name)
	if err != nil {
		return err
	}
	return m.do(ctx, key{source, name}, "reset", noSessions, func(ctx context.Context, b *branch) error {
		return m.resetBranch(ctx, b, "admin reset")
	})
}

// Destroy removes the branch and its data; it refuses a branch with open sessions.
func (m *Manager) Destroy(ctx context.Context, source, name string) error {
	source, err := m.sourceOfBranch(source, name)
	if err != nil {
		return err
	}
	return m.do(ctx, key{source, name}, "destroy", noSessions, func(ctx context.Context, b *branch) error {
		return m.destroyBranch(ctx, b, "admin destroy")
	})
}

// Stop stops the branch's server, keeping its data; it refuses a branch with open sessions.
func (m *Manager) Stop(ctx context.Context, source, name string) error {
	source, err := m.sourceOfBranch(source, name)
	if err != nil {
		return err
	}
	return m.do(ctx, key{source, name}, "stop", noSessions, func(ctx context.Context, b *branch) error {
		return m.stopBranch(ctx, b, "admin stop")
	})
}

// Settings are per-branch overrides of the lifecycle policy; nil fields stay as they are.
type Settings struct {
	TTL   *time.Duration `json:"ttl,omitempty"`
	Quota *int64         `json:"quota,omitempty"`
}

// Set changes a branch's TTL or quota.
func (m *Manager) Set(ctx context.Context, source, name string, s Settings) error {
	source, err := m.sourceOfBranch(source, name)
	if err != nil {
		return err
	}
	if (s.TTL != nil && *s.TTL < 0) || (s.Quota != nil && *s.Quota < 0) {
		return fmt.Errorf("%w: negative ttl or quota", ErrInvalid)
	}
	err = m.do(ctx, key{source, name}, "set", nil, func(ctx context.Context, b *branch) error {
		return m.save(ctx, b, "admin set", func(r *catalog.Branch) {
			if s.TTL != nil {
				r.TTL = *s.TTL
			}
			if s.Quota != nil {
				r.Quota = *s.Quota
			}
		})
	})
	if err == nil {
		m.kickReaper()
	}
	return err
}

func noSessions(b *branch) error {
	if b.sessions > 0 {
		return fmt.Errorf("branch %q: %w (%d)", b.rec.Name, ErrBusy, b.sessions)
	}
	return nil
}

// sourceOfBranch finds the source of a branch named name when source is "".
func (m *Manager) sourceOfBranch(source, name string) (string, error) {
	if source != "" {
		return source, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var found []string
	for k := range m.branches {
		if k.name == name {
			found = append(found, k.source)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("branch %q: %w", name, ErrNotFound)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%w: branch %q exists in several sources %v: name one with --source", ErrInvalid, name, found)
}

// pickSource returns name if it exists, or the only source when name is "".
func (m *Manager) pickSource(name string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if name != "" {
		if m.sources[name] == nil {
			return "", fmt.Errorf("source %q: %w", name, ErrNotFound)
		}
		return name, nil
	}
	if len(m.sources) == 1 {
		for n := range m.sources {
			return n, nil
		}
	}
	if len(m.sources) == 0 {
		return "", fmt.Errorf("no sources: %w", ErrNotFound)
	}
	return "", fmt.Errorf("%w: several sources exist: name one with --source", ErrInvalid)
}

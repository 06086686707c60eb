package branches

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/router"
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
		l.m.mu.Unlock()
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
	created := false
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
			nb, err := m.newBranchLocked(k, route)
			if err != nil {
				m.mu.Unlock()
				return nil, err
			}
			m.branches[k] = nb
			o = m.startOp(nb, "create", func(ctx context.Context) error { return m.create(ctx, nb, "first connection") })
			created = true
		case b.op != nil:
			o = b.op
		case b.rec.State == catalog.Running && b.inst != nil:
			b.sessions++
			b.rec.LastUsedAt = m.now()
			l := &Lease{m: m, b: b, socket: b.inst.SocketPath(), Source: source, Branch: route.Branch, Created: created}
			m.mu.Unlock()
			return l, nil
		default:
			o = m.startOp(b, "wake", func(ctx context.Context) error { return m.startServer(ctx, b) })
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
	Source string // "" picks the only source
	From   string // parent branch; "" for the seed
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
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	if _, ok := m.branches[key{source, name}]; ok {
		m.mu.Unlock()
		return fmt.Errorf("branch %q of source %q: %w", name, source, ErrExists)
	}
	nb, err := m.newBranchLocked(key{source, name}, router.Route{Branch: name, Options: router.Options{From: opts.From}})
	if err != nil {
		m.mu.Unlock()
		return err
	}
	m.branches[key{source, name}] = nb
	o := m.startOp(nb, "create", func(ctx context.Context) error { return m.create(ctx, nb, "admin create") })
	m.mu.Unlock()
	return wait(ctx, o)
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

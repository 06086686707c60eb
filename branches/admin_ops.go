package branches

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// CreateOptions are the settings of a branch created through the admin API.
type CreateOptions struct {
	Source    string        // "" picks the only source, else the only one not seeded from a branch
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
	if m.cfg.Join {
		// Sources may have been added on another node.
		if err := m.syncSources(ctx); err != nil {
			return err
		}
	}
	source, err := m.createSource(opts)
	if err != nil {
		return err
	}
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return ErrClosed
		}
		if b := m.branches[key{source, name}]; b != nil {
			switch {
			case !b.ended():
				lost, id := b.rec.State == catalog.Lost && b.op == nil, b.rec.ID
				m.mu.Unlock()
				if lost && m.lostRowGone(ctx, key{source, name}, id) {
					continue // its row was removed through another process: the name is free
				}
				return fmt.Errorf("branch %q of source %q: %w", name, source, ErrExists)
			case b.fenced: // not this node's to destroy
				m.mu.Unlock()
				return m.fencedErr(name)
			case b.rec.State == catalog.Lost:
				idle, id := b.op == nil, b.rec.ID
				m.mu.Unlock()
				if idle && m.lostRowGone(ctx, key{source, name}, id) {
					continue
				}
				return fmt.Errorf("branch %q: %w", name, ErrLost)
			}
			// Gone for clients (burst.go): the name is free once it is destroyed.
			o, own := b.op, b.op == nil
			if own {
				o = m.destroyEndedLocked(b)
			}
			m.mu.Unlock()
			if err := wait(ctx, o); err != nil && (own || ctx.Err() != nil) {
				return err
			}
			continue
		}
		if m.overBudgetLocked() {
			m.mu.Unlock()
			if err := m.makeBudgetRoom(ctx); err != nil {
				return err
			}
			continue // the world may have changed while unlocked
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

// OpOptions say how Reset, Destroy and Stop treat a branch that has sessions.
type OpOptions struct {
	// Force ends the branch's sessions rather than refusing the operation
	// (ErrBusy): its server is stopped under them, and each client is told so by
	// its backend (57P01, as after pg_terminate_backend).
	Force bool
}

// Reset throws the branch's writes away; it refuses a branch with open sessions
// unless o.Force.
func (m *Manager) Reset(ctx context.Context, source, name string, o OpOptions) error {
	return m.adminOp(ctx, source, name, "reset", o, m.resetBranch)
}

// Destroy removes the branch and its data; it refuses a branch with open sessions
// unless o.Force.
func (m *Manager) Destroy(ctx context.Context, source, name string, o OpOptions) error {
	return m.adminOp(ctx, source, name, "destroy", o, m.destroyBranch)
}

// Stop stops the branch's server, keeping its data; it refuses a branch with open
// sessions unless o.Force.
func (m *Manager) Stop(ctx context.Context, source, name string, o OpOptions) error {
	return m.adminOp(ctx, source, name, "stop", o, m.stopBranch)
}

// adminOp runs one of the lifecycle steps on a branch with no sessions (or, with
// o.Force, on one with sessions, which the step's stop of the server ends), on
// behalf of the admin API, and counts it.
func (m *Manager) adminOp(ctx context.Context, source, name, what string, o OpOptions, step func(context.Context, *branch, string) error) error {
	src, err := m.sourceOfBranch(source, name)
	if err != nil {
		if err = m.elsewhere(ctx, source, name, what, err); err == nil {
			m.cfg.Metrics.action(what, "admin")
		}
		return err
	}
	source = src
	check := func(b *branch) error {
		if what != "destroy" && b.rec.State == catalog.Lost {
			return fmt.Errorf("branch %q: %w; only destroying it is possible", name, ErrLost)
		}
		if o.Force {
			if b.internal > 0 {
				// A fork, diff or snapshot reads the branch's files: it is not
				// ended, and the operation waits for nothing.
				return fmt.Errorf("branch %q: %w: the server's own work on it (a fork, a diff) is in progress; try again when it ends", name, ErrBusy)
			}
			return nil
		}
		return noSessions(b)
	}
	start := time.Now()
	err = m.do(ctx, key{source, name}, what, check, func(ctx context.Context, b *branch) error {
		return step(ctx, b, "admin "+what)
	})
	err = m.elsewhere(ctx, source, name, what, err)
	if err == nil {
		m.cfg.Metrics.action(what, "admin")
		m.cfg.Metrics.took(what, time.Since(start))
	}
	return err
}

// Settings are per-branch overrides of the lifecycle policy; nil fields stay as they are.
type Settings struct {
	TTL   *TTL   `json:"ttl,omitempty"`
	Quota *int64 `json:"quota,omitempty"`
	// Ephemeral false keeps a branch that was to be destroyed with its last session
	// (a test helper does this when the test failed); true makes it ephemeral.
	Ephemeral *bool `json:"ephemeral,omitempty"`
	// ServerLimits caps the branch's server from its next start (container runtimes).
	ServerLimits
}

// Set changes a branch's TTL, quota or ephemeral mark.
func (m *Manager) Set(ctx context.Context, source, name string, s Settings) error {
	src, err := m.sourceOfBranch(source, name)
	if err != nil {
		return m.elsewhere(ctx, source, name, "set", err)
	}
	source = src
	if (s.TTL != nil && *s.TTL < 0) || (s.Quota != nil && *s.Quota < 0) {
		return fmt.Errorf("%w: negative ttl or quota", ErrInvalid)
	}
	// Before anything is saved: a refused request changes nothing.
	if err := m.checkLimits(deref(s.MemoryBytes), deref(s.CPUs), deref(s.PIDs)); err != nil {
		return err
	}
	err = m.do(ctx, key{source, name}, "set", nil, func(ctx context.Context, b *branch) error {
		if s.Ephemeral != nil && *s.Ephemeral {
			if err := m.recordPastSessions(ctx, b); err != nil {
				return err
			}
		}
		return m.save(ctx, b, "admin set", func(r *catalog.Branch) {
			if s.TTL != nil {
				r.TTL = time.Duration(*s.TTL)
			}
			if s.Quota != nil {
				r.Quota = *s.Quota
			}
			if s.Ephemeral != nil {
				r.Ephemeral = *s.Ephemeral
			}
		})
	})
	err = m.elsewhere(ctx, source, name, "set", err)
	if err == nil && s.ServerLimits != (ServerLimits{}) {
		err = m.SetLimits(ctx, source, name, s.ServerLimits)
	}
	if err == nil {
		m.kickReaper()
	}
	return err
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

// createSource is the source of a new branch: opts.Source, else its parent's (the
// only source with a branch named opts.From), else pickSource's.
func (m *Manager) createSource(opts CreateOptions) (string, error) {
	if opts.Source != "" || opts.From == "" {
		return m.pickSource(opts.Source)
	}
	source, err := m.sourceOfBranch("", opts.From)
	if errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("parent branch %q: %w", opts.From, ErrNotFound)
	}
	return source, err
}

// pickSource returns name if it exists; when name is "", the only source, else the
// only one not seeded from a branch (as the proxy routes a database several sources
// have: a template of migrations, as pgbranchtest makes, is not where new branches
// go unless named).
func (m *Manager) pickSource(name string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if name != "" {
		if m.sources[name] == nil {
			return "", fmt.Errorf("source %q: %w", name, ErrNotFound)
		}
		return name, nil
	}
	if len(m.sources) == 0 {
		return "", fmt.Errorf("no sources: %w", ErrNotFound)
	}
	var all, own []string
	for n, s := range m.sources {
		all = append(all, n)
		if s.src.Kind != KindBranch {
			own = append(own, n)
		}
	}
	switch {
	case len(all) == 1:
		return all[0], nil
	case len(own) == 1:
		return own[0], nil
	}
	if len(own) > 1 {
		all = own
	}
	slices.Sort(all)
	return "", fmt.Errorf("%w: several sources exist (%s): name one with --source", ErrInvalid, strings.Join(all, ", "))
}

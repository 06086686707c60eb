package branches

import (
	"context"
	"errors"

	"github.com/pgbranchproxy/pgbranchproxy/router"
	"go.uber.org/zap"
)

// errParentRead: the parent's roles and databases need no new read.
var errParentRead = errors.New("parent's roles are current")

// readParent reads again the roles and databases of the running parent that a new
// branch's route names (pgbranch.from), when they may have changed since they were
// last read: the parent has sessions, or has had one since. The fork's first login
// then authenticates against the parent's roles as the fork takes them, and may
// name a database the parent has just created, instead of waiting for a reaper
// pass to read them. Best effort: on failure the last read stands.
func (m *Manager) readParent(ctx context.Context, source string, route router.Route) {
	if route.Options.From == "" {
		return
	}
	m.mu.Lock()
	exists := m.branches[key{source, route.Branch}] != nil
	m.mu.Unlock()
	if exists {
		return
	}
	pk := key{source, route.Options.From}
	asked := m.now()
	err := m.do(ctx, pk, "roles", func(p *branch) error {
		switch {
		case p.inst == nil || p.ended():
			return errParentRead
		case !p.rolesRead.Before(asked):
			return errParentRead // read since: forks fanning out share a read
		case p.sessions == 0 && !p.rec.LastUsedAt.After(p.rolesRead):
			return errParentRead
		}
		p.rolesAt = m.now()
		return nil
	}, func(ctx context.Context, p *branch) error { return m.refreshRoles(ctx, p) })
	if err != nil && !errors.Is(err, errParentRead) && !errors.Is(err, ErrNotFound) && ctx.Err() == nil {
		m.log.Warn("read the roles of a parent to fork", zap.String("parent", route.Options.From), zap.Error(err))
	}
}

package branches

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/failpoint"
	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"go.uber.org/zap"
)

// Roles returns the login roles a session on route would authenticate against: the
// branch's own, as last read from its server, when it exists; else its base's (the
// parent named by pgbranch.from, or the source's seed). It never creates, wakes or
// changes a branch.
//
// A route whose source cannot be told in a way that names sources or databases
// (router.NamesSources) gets a *roles.AfterLogin with the roles of every source's
// seed, so that only a client that logs in is told which sources there are.
func (m *Manager) Roles(ctx context.Context, route router.Route) (roles.Set, error) {
	source, err := router.ResolveSource(route, m.routerSources(route))
	if err != nil {
		if router.NamesSources(err) {
			return nil, m.afterLogin(err)
		}
		return nil, err
	}
	m.readParent(ctx, source, route)
	m.mu.Lock()
	var text string
	var seedID int64
	if b := m.branches[key{source, route.Branch}]; b != nil {
		text, seedID = b.rec.Roles, b.rec.SeedID
	} else if p := m.branches[key{source, route.Options.From}]; route.Options.From != "" && p != nil {
		text, seedID = p.rec.Roles, p.rec.SeedID
	} else if s := m.sources[source]; s != nil && s.seed != nil {
		// Read now: a refresh may replace the generation, and remove it, at once.
		text, seedID = s.seed.Roles, s.seed.ID
	}
	m.mu.Unlock()
	if text == "" {
		if seedID == 0 {
			return nil, fmt.Errorf("source %q: %w", source, ErrNotFound)
		}
		sd, err := m.seedByID(seedID)
		if err != nil {
			return nil, err
		}
		text = sd.Roles
	}
	return roles.Decode(text)
}

// afterLogin wraps err, an error a client may be told only once it has logged
// in, with the roles of every source's current seed (a role of several sources
// as the first of them by name has it) to log in with first.
func (m *Manager) afterLogin(err error) error {
	m.mu.Lock()
	var texts []string // read under the lock: a refresh may replace a generation, and remove it, at once
	for _, name := range slices.Sorted(maps.Keys(m.sources)) {
		if s := m.sources[name]; s.seed != nil {
			texts = append(texts, s.seed.Roles)
		}
	}
	m.mu.Unlock()
	sets := make([]roles.Set, 0, len(texts))
	for _, text := range texts {
		set, serr := roles.Decode(text)
		if serr != nil {
			return serr
		}
		sets = append(sets, set)
	}
	return &roles.AfterLogin{Set: roles.Union(sets...), Err: err}
}

// refreshRoles reads the roles of a running branch and records them if they changed.
// It is called by the goroutine that owns b's operation, or by the reaper.
func (m *Manager) refreshRoles(ctx context.Context, b *branch) error {
	m.mu.Lock()
	inst, rec := b.inst, b.rec
	m.mu.Unlock()
	if inst == nil {
		return nil
	}
	sd, err := m.seedByID(rec.SeedID)
	if err != nil {
		return err
	}
	if err := m.fault(failpoint.Roles, b); err != nil {
		return err
	}
	began := m.now()
	set, dbs, err := readRoles(ctx, inst.SocketPath(), sd)
	if err != nil {
		return fmt.Errorf("read roles of branch %q: %w", rec.Name, err)
	}
	m.mu.Lock()
	if b.rolesRead.Before(began) {
		b.rolesRead = began
	}
	m.mu.Unlock()
	if enc := set.Encode(); enc != rec.Roles || !slices.Equal(dbs, rec.Databases) {
		return m.save(ctx, b, "roles changed", func(r *catalog.Branch) { r.Roles, r.Databases = enc, dbs })
	}
	return nil
}

// readRoles connects to the server on socket as the seed's superuser and reads
// pg_authid, and the databases (for checkDatabase).
func readRoles(ctx context.Context, socket string, sd catalog.Seed) (roles.Set, []string, error) {
	c, err := superuserConn(ctx, sd, func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	})
	if err != nil {
		return nil, nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	set, err := roles.Read(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	dbs, err := readDatabases(ctx, c)
	return set, dbs, err
}

// superuserConn connects to a branch server, reached with dial, as its seed's
// superuser, to its maintenance database.
func superuserConn(ctx context.Context, sd catalog.Seed, dial func(context.Context) (net.Conn, error)) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		return nil, err
	}
	db := "postgres"
	if len(sd.Databases) > 0 && !slices.Contains(sd.Databases, db) {
		db = sd.Databases[0]
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Database = "/pgbranch", 5432, sd.Superuser, db
	cfg.TLSConfig, cfg.Fallbacks = nil, nil
	cfg.ConnectTimeout = 10 * time.Second
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }
	cfg.RuntimeParams = map[string]string{"application_name": "pgbranchproxy"}
	return pgx.ConnectConfig(ctx, cfg)
}

// rolesEvery is the least time between two reads of a running branch's roles.
// Each read starts a backend on the branch's server, and a branch in constant use
// (a new connection per transaction) is read at every timed pass: with a short
// --reap-interval that was several backend starts a second, each as costly as the
// forks that server-session reuse saves.
const rolesEvery = 2 * time.Second

// dueRoles reports whether the roles of b, running, should be read again at now:
// with sessions open at each timed pass (timed), so that a password changed in one
// session applies to the next login from the next timed pass on; without, once
// after they were used. Passes kicked in between (each ephemeral session's end
// kicks one) read no in-use branch's. Either way not within rolesEvery of the last
// read (less a tenth: passes do not reach their roles step at even intervals, and
// a 2 s reaper would otherwise read every other pass). A clock set back reads at
// once. m.mu is held.
func (b *branch) dueRoles(timed bool, now time.Time) bool {
	switch since := now.Sub(b.rolesAt); {
	case since < 0:
		return true
	case since < rolesEvery-rolesEvery/10:
		return false
	}
	if b.sessions > 0 {
		return timed
	}
	return b.rec.LastUsedAt.After(b.rolesAt)
}

// refreshRunningRoles re-reads the roles of running branches used since their roles
// were last read (in use: at timed passes, see dueRoles), so that a password changed
// inside a branch applies to its next logins at the proxy.
func (m *Manager) refreshRunningRoles(ctx context.Context, timed bool) {
	var todo []*branch
	m.mu.Lock()
	now := m.now()
	for _, b := range m.branches {
		if b.inst != nil && b.op == nil && b.dueRoles(timed, now) {
			todo = append(todo, b)
			b.rolesAt = now
		}
	}
	m.mu.Unlock()
	for _, b := range todo {
		err := m.do(ctx, key{b.rec.Source, b.rec.Name}, "roles", nil, func(ctx context.Context, b *branch) error {
			return m.refreshRoles(ctx, b)
		})
		if err != nil && ctx.Err() == nil {
			m.log.Debug("refresh roles", zap.String("branch", b.rec.Name), zap.Error(err))
		}
	}
}

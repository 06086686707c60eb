package branches

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/failpoint"
	"github.com/pgbranchproxy/pgbranchproxy/branches/seed"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"go.uber.org/zap"
)

// SourceRequest describes a source to add.
type SourceRequest struct {
	Name     string
	Kind     string // seed.KindSQL, KindURL, KindDataDir or KindEmpty
	SQLFile  string
	Database string // for KindSQL; default: Name
	URL      string
	DataDir  string
	Branch   string // for KindBranch: "SOURCE/BRANCH"
	// Server is the image its seeds and servers run in and its servers' limits,
	// under a container runtime; zero fields take the server's defaults.
	Server catalog.ServerSettings
	// Warm is how many pooled branches the source keeps; nil: the server's default.
	Warm     *int
	DumpPath string // KindDump: a pg_dump archive
	BuildOptions
}

// SourceInfo describes one source and its current seed.
type SourceInfo struct {
	Name       string    `json:"name"`
	Kind       string    `json:"kind"`
	Generation int       `json:"generation"`
	PGVersion  string    `json:"pg_version"`
	Databases  []string  `json:"databases"`
	Database   string    `json:"database,omitempty"` // the database clients use by default ("" when the source does not say)
	From       string    `json:"from,omitempty"`     // of a source seeded from a branch: that branch, SOURCE/BRANCH
	Branches   int       `json:"branches"`           // on a node of several, every node's
	Warm       int       `json:"warm"`               // pooled branches it keeps
	WarmSet    int       `json:"warm_setting"`       // its own setting; -1: the server's --warm
	Pooled     int       `json:"pooled"`             // pooled branches ready or being made
	CreatedAt  time.Time `json:"created_at"`
	SeededAt   time.Time `json:"seeded_at"`
	// Nodes, on a node of several, are the nodes that hold the current seed (its
	// builder and the nodes with a copy), where fronts place new branches.
	Nodes []string `json:"nodes,omitempty"`
	// ServerView is, under a container runtime, the image of the source's
	// seeds and servers, and the limits of its branches' servers that set none.
	ServerView
}

// AddSource records a source and builds and settles its first seed, reporting steps
// to progress. It returns when the seed is ready.
func (m *Manager) AddSource(ctx context.Context, req SourceRequest, progress func(string)) (SourceInfo, error) {
	if !router.ValidSourceName(req.Name) {
		return SourceInfo{}, fmt.Errorf("%w: source name %q: %s", ErrInvalid, req.Name, router.SourceNameHint())
	}
	spec := ""
	switch req.Kind {
	case seed.KindSQL:
		if req.Database == "" {
			req.Database = req.Name
		}
		abs, err := filepath.Abs(req.SQLFile)
		if err != nil {
			return SourceInfo{}, err
		}
		if _, err := os.Stat(abs); err != nil {
			return SourceInfo{}, fmt.Errorf("%w: SQL file: %v", ErrInvalid, err)
		}
		req.SQLFile, spec = abs, abs
	case seed.KindURL:
		spec = req.URL
		if req.Mask != "" && req.Database == "" {
			req.Database = urlDatabase(req.URL) // the mask runs in the database the URL names
		}
	case seed.KindDataDir:
		spec = req.DataDir
	case KindBranch:
		from, _, err := parseBranchSpec(req.Branch)
		if err != nil {
			return SourceInfo{}, err
		}
		spec = req.Branch
		if req.Server.Image == "" {
			// The seed is the parent's files: the parent's image opens it.
			if ps, err := m.cat.ServerSettingsOf(ctx, from, "", time.Time{}); err == nil {
				req.Server.Image = ps.Image
			}
		}
		m.mu.Lock()
		if ps := m.sources[from]; ps != nil && req.Database == "" {
			req.Database = ps.src.DefaultDatabase
		}
		m.mu.Unlock()
	case seed.KindDump:
		if err := req.checkDump(); err != nil {
			return SourceInfo{}, err
		}
		spec = req.DumpPath
	case seed.KindEmpty:
	default:
		return SourceInfo{}, fmt.Errorf("%w: unknown source kind %q", ErrInvalid, req.Kind)
	}
	now := m.now()
	if req.Mask != "" && req.Database == "" {
		req.Database = req.Name
	}
	src := catalog.Source{Name: req.Name, Kind: req.Kind, Spec: spec, DefaultDatabase: req.Database, Options: req.BuildOptions.encode(), CreatedAt: now, Warm: -1}
	if req.Warm != nil {
		if *req.Warm < 0 {
			return SourceInfo{}, fmt.Errorf("%w: warm %d: want 0 or more", ErrInvalid, *req.Warm)
		}
		src.Warm = *req.Warm
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return SourceInfo{}, ErrClosed
	}
	if err := m.cat.AddSource(ctx, src); err != nil {
		if errors.Is(err, catalog.ErrExists) {
			return SourceInfo{}, fmt.Errorf("source %q: %w", req.Name, ErrExists)
		}
		return SourceInfo{}, err
	}
	if err := m.addSourceServer(ctx, req.Name, req.Server); err != nil {
		return SourceInfo{}, err
	}
	sd, err := m.buildSeed(ctx, src, req, progress)
	if err != nil {
		if derr := m.cat.DeleteSource(context.WithoutCancel(ctx), src.Name); derr != nil {
			m.log.Error("remove failed source", zap.Error(derr))
		}
		return SourceInfo{}, err
	}
	m.mu.Lock()
	m.sources[src.Name] = &sourceState{src: src, seed: &sd}
	m.mu.Unlock()
	m.refillPools()
	return m.sourceInfo(src.Name), nil
}

// RefreshSource builds a new seed generation of a source from the same origin. New
// branches use it; existing branches keep the generation they were made from, which
// is removed once the last of them is destroyed.
func (m *Manager) RefreshSource(ctx context.Context, name string, progress func(string)) (SourceInfo, error) {
	m.mu.Lock()
	st := m.sources[name]
	m.mu.Unlock()
	if st == nil {
		return SourceInfo{}, fmt.Errorf("source %q: %w", name, ErrNotFound)
	}
	req := SourceRequest{Name: name, Kind: st.src.Kind, Database: st.src.DefaultDatabase}
	switch st.src.Kind {
	case seed.KindSQL:
		req.SQLFile = st.src.Spec
	case seed.KindURL:
		req.URL = st.src.Spec
	case seed.KindDataDir:
		req.DataDir = st.src.Spec
	case KindBranch:
		req.Branch = st.src.Spec
	case seed.KindDump:
		req.DumpPath = st.src.Spec
	}
	if err := req.BuildOptions.decode(st.src.Options); err != nil {
		return SourceInfo{}, err
	}
	// What the refresh reads must still be there, before a new cluster is made.
	switch st.src.Kind {
	case seed.KindDump:
		if err := req.checkDump(); err != nil {
			return SourceInfo{}, err
		}
	case seed.KindSQL:
		if _, err := os.Stat(req.SQLFile); err != nil {
			return SourceInfo{}, fmt.Errorf("%w: SQL file: %v", ErrInvalid, err)
		}
	}
	sd, err := m.buildSeed(ctx, st.src, req, progress)
	if err != nil {
		return SourceInfo{}, err
	}
	m.mu.Lock()
	st.seed = &sd
	m.mu.Unlock()
	m.refillPools() // pool members of the old generation are replaced, never handed out
	m.collectSeeds(ctx)
	return m.sourceInfo(name), nil
}

// collectSeeds removes seed generations that are not their source's newest and that
// no branch uses any more.
func (m *Manager) collectSeeds(ctx context.Context) {
	if m.cat.NodeLost() { // the seeds are the registration's that replaced this one
		return
	}
	seeds, err := m.cat.Seeds(ctx)
	if err != nil {
		return
	}
	// Other nodes' branches, which this manager does not hold, use seeds too.
	all, err := m.cat.Branches(ctx)
	if err != nil {
		return
	}
	used := map[int64]bool{}
	for _, b := range all {
		used[b.SeedID] = true
	}
	// Each source's newest ready generation is kept, as the catalog records it: on
	// a node of several it may be newer than this node knows yet.
	for _, sd := range catalog.NewestSeeds(seeds) {
		used[sd.ID] = true
	}
	m.mu.Lock()
	for _, b := range m.branches {
		used[b.rec.SeedID] = true
	}
	for _, st := range m.sources {
		if st.seed != nil {
			used[st.seed.ID] = true
		}
	}
	m.mu.Unlock()
	m.collectCopies(ctx, seeds, all)
	for _, sd := range seeds {
		// A seed another node built is that node's to remove.
		if used[sd.ID] || sd.State != catalog.SeedReady || !m.builtHere(sd) {
			continue
		}
		if err := os.RemoveAll(filepath.Dir(m.seedDir(sd))); err != nil {
			m.log.Warn("remove old seed", zap.String("source", sd.Source), zap.Int("generation", sd.Generation), zap.Error(err))
			continue
		}
		m.cat.DeleteSeed(context.WithoutCancel(ctx), sd.ID)
		m.log.Info("removed unused seed generation", zap.String("source", sd.Source), zap.Int("generation", sd.Generation))
	}
}

// builtHere reports whether this node built sd: the node it records, or, for a
// single server's seed from before nodes, its directory in this state directory.
func (m *Manager) builtHere(sd catalog.Seed) bool {
	if sd.NodeID != "" {
		me, _, _ := m.cat.Registration()
		return sd.NodeID == me
	}
	// On a node of several, every node's state directory may have the same path:
	// a seed of no node is nobody's to remove.
	return !m.cfg.Join && sd.Dir == m.seedDir(sd)
}

// buildSeed builds a new seed generation of src in the build area and moves it under
// seeds/ once settled.
func (m *Manager) buildSeed(ctx context.Context, src catalog.Source, req SourceRequest, progress func(string)) (catalog.Seed, error) {
	sd, err := m.cat.AddSeed(ctx, catalog.Seed{Source: src.Name, CreatedAt: m.now()})
	if err != nil {
		return catalog.Seed{}, err
	}
	work := m.buildDir(sd)
	final := m.seedDir(sd)
	cleanup := func() {
		os.RemoveAll(work)
		os.RemoveAll(filepath.Dir(final))
		m.cat.DeleteSeed(context.WithoutCancel(ctx), sd.ID)
	}
	if err := os.MkdirAll(work, 0o711); err != nil {
		cleanup()
		return catalog.Seed{}, err
	}
	start := time.Now()
	if err := m.cfg.Failpoints.Hit(failpoint.InitDB, src.Name, 0); err != nil {
		cleanup()
		return catalog.Seed{}, err
	}
	breq := seed.Request{
		Kind: req.Kind, SQLFile: req.SQLFile, Database: req.Database, URL: req.URL, DataDir: req.DataDir,
		DumpPath: req.DumpPath, KeepOwners: req.KeepOwners, Jobs: req.Jobs, Mask: req.Mask,
		Dir: filepath.Join(work, "data"), Progress: progress, Image: m.sourceImage(ctx, src.Name),
	}
	if req.Kind == KindBranch {
		breq.Kind, breq.DataDir = seed.KindDataDir, filepath.Join(work, "branch")
		if err := m.snapshotBranch(ctx, req.Branch, breq.DataDir, progress); err != nil {
			cleanup()
			return catalog.Seed{}, err
		}
	}
	res, err := m.cfg.Builder.Build(ctx, breq)
	if err != nil {
		cleanup()
		return catalog.Seed{}, fmt.Errorf("build seed of %q: %w", src.Name, err)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		cleanup()
		return catalog.Seed{}, err
	}
	if err := os.Rename(filepath.Join(work, "data"), final); err != nil {
		cleanup()
		return catalog.Seed{}, err
	}
	os.RemoveAll(work)
	if err := writeSnapshot(final, res.Snapshot); err != nil {
		cleanup()
		return catalog.Seed{}, err
	}
	sd.State, sd.Dir, sd.PGVersion, sd.Databases, sd.Superuser, sd.ReadyAt = catalog.SeedReady, final, res.PGVersion, res.Databases, res.Superuser, m.now()
	sd.Roles = res.Roles.Encode()
	if m.cfg.Join {
		// Other nodes copy it, checked against its manifest (seedpull.go).
		if sd.Manifest, err = m.writeManifest(sd); err != nil {
			cleanup()
			return catalog.Seed{}, err
		}
	}
	if err := m.cat.UpdateSeed(ctx, sd); err != nil {
		cleanup()
		return catalog.Seed{}, err
	}
	m.log.Info("seed ready", zap.String("source", src.Name), zap.Int("generation", sd.Generation),
		zap.String("pg_version", sd.PGVersion), zap.Strings("databases", sd.Databases), zap.Duration("took", time.Since(start)))
	progress(fmt.Sprintf("seed generation %d ready in %s", sd.Generation, time.Since(start).Round(time.Millisecond)))
	return sd, nil
}

func (m *Manager) buildDir(sd catalog.Seed) string {
	return filepath.Join(m.cfg.StateDir, "build", fmt.Sprintf("%s-g%d", sd.Source, sd.Generation))
}

// seedDir is the settled data directory of sd. Its parent is root-only: nothing but
// the overlay mounts reads it.
func (m *Manager) seedDir(sd catalog.Seed) string {
	return filepath.Join(m.cfg.StateDir, "seeds", sd.Source, fmt.Sprintf("g%d", sd.Generation), "data")
}

// RemoveSource deletes a source and its seeds. It refuses while branches of it exist.
func (m *Manager) RemoveSource(ctx context.Context, name string) error {
	m.mu.Lock()
	n, _, err := m.sourceBranchesLocked(name)
	m.mu.Unlock()
	if err != nil {
		return err
	}
	others, err := m.othersHoldSource(ctx, name)
	if err != nil {
		return err
	}
	if err := refuseInUse(name, n, others); err != nil {
		return err
	}
	// Looked at again under the lock that takes the source away: a branch made
	// or claimed while the catalog was read counts, and once it is gone no
	// creation, claim or refill finds it.
	m.mu.Lock()
	n, pooled, err := m.sourceBranchesLocked(name)
	if err == nil {
		err = refuseInUse(name, n, 0)
	}
	s := m.sources[name]
	if err == nil {
		delete(m.sources, name)
		// Until its catalog rows are gone, a read of the catalog's sources (a
		// listing, a reaper pass) would bring it back, and a refill with it.
		if m.removing == nil {
			m.removing = map[string]bool{}
		}
		m.removing[name] = true
	}
	m.mu.Unlock()
	if err != nil {
		return err
	}
	// Gone from the catalog already (another node removed it): done here too.
	err = m.dropSource(ctx, name, pooled)
	m.mu.Lock()
	delete(m.removing, name)
	if err != nil && !errors.Is(err, catalog.ErrNotFound) {
		// Still the catalog's: it stays this server's too (the refill rebuilds
		// its pool).
		if m.sources[name] == nil {
			m.sources[name] = s
		}
		m.mu.Unlock()
		return err
	}
	m.mu.Unlock()
	return os.RemoveAll(filepath.Join(m.cfg.StateDir, "seeds", name))
}

// sourceBranchesLocked counts the branches of source name here, and returns its
// pool members apart; ErrNotFound when the source is unknown. A lost branch of
// another node, which every node started since holds, is that node's: it is
// counted among the other nodes' (othersHoldSource), not twice. m.mu is held.
func (m *Manager) sourceBranchesLocked(name string) (n int, pooled []key, err error) {
	if m.sources[name] == nil {
		return 0, nil, fmt.Errorf("source %q: %w", name, ErrNotFound)
	}
	me, _, _ := m.cat.Registration()
	for k, b := range m.branches {
		switch {
		case k.source != name:
		case b.rec.State == catalog.Lost && b.rec.NodeID != me:
		case b.rec.Pooled:
			pooled = append(pooled, k)
		default:
			n++
		}
	}
	return n, pooled, nil
}

// refuseInUse refuses to remove source name while it has branches here (pool
// members apart) or on other nodes (pool members included).
func refuseInUse(name string, here, others int) error {
	switch {
	case others > 0:
		return &sourceInUse{fmt.Sprintf("source %q has %d branches on this node and %d on other nodes (pooled ones included): "+
			"destroy them, and set its warm pool to 0 (source set --warm 0), first", name, here, others)}
	case here > 0:
		return &sourceInUse{fmt.Sprintf("source %q has %d branches: destroy them first", name, here)}
	}
	return nil
}

// dropSource destroys a removed source's pool members and deletes its catalog rows.
func (m *Manager) dropSource(ctx context.Context, name string, pooled []key) error {
	for _, k := range pooled {
		if err := m.do(ctx, k, "destroy", nil, func(ctx context.Context, b *branch) error {
			return m.destroyBranch(ctx, b, "source removed")
		}); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	if err := m.cat.DeleteSource(ctx, name); err != nil {
		if errors.Is(err, catalog.ErrSourceHasBranches) {
			// Another node made one since othersHoldSource looked.
			return &sourceInUse{err.Error()}
		}
		return err
	}
	return nil
}

// Sources lists the sources.
func (m *Manager) Sources() []SourceInfo {
	m.syncForListing()
	m.mu.Lock()
	names := make([]string, 0, len(m.sources))
	for n := range m.sources {
		names = append(names, n)
	}
	m.mu.Unlock()
	slices.Sort(names)
	out := make([]SourceInfo, 0, len(names))
	for _, n := range names {
		out = append(out, m.sourceInfo(n))
	}
	m.addSeedHolders(out)
	m.addClusterBranches(out)
	if views, ok := m.serverViews(); ok {
		for i := range out {
			out[i].ServerView = views.source(out[i].Name)
		}
	}
	return out
}

// holdersTimeout bounds the catalog reads of addSeedHolders.
const holdersTimeout = 2 * time.Second

// syncForListing reads, on a node of several, the sources other nodes added or
// removed since the last reaper pass, so that a listing through a front does
// not depend on which node answers. A catalog that does not answer within
// holdersTimeout leaves the sources this node knows.
func (m *Manager) syncForListing() {
	if !m.cfg.Join {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), holdersTimeout)
	defer cancel()
	if err := m.syncSources(ctx); err != nil {
		m.log.Debug("read the catalog's sources for a listing", zap.Error(err))
	}
}

// addClusterBranches counts, on a node of several, every node's branches of
// each source, as the catalog has them: this node holds only its own, and a
// front passes source ls to any node. Pool members stay this node's count, as
// its warm setting is. A catalog that does not answer within holdersTimeout
// leaves this node's counts.
func (m *Manager) addClusterBranches(infos []SourceInfo) {
	if !m.cfg.Join {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), holdersTimeout)
	defer cancel()
	all, err := m.cat.Branches(ctx)
	if err != nil {
		return
	}
	n := map[string]int{}
	for _, b := range all {
		if !b.Pooled {
			n[b.Source]++
		}
	}
	for i := range infos {
		infos[i].Branches = n[infos[i].Name]
	}
}

// addSeedHolders fills in, on a node of several, the nodes that hold each
// source's current seed; a catalog that does not answer within holdersTimeout
// leaves them out.
func (m *Manager) addSeedHolders(infos []SourceInfo) {
	if !m.cfg.Join {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), holdersTimeout)
	defer cancel()
	for i := range infos {
		m.mu.Lock()
		var id int64
		if s := m.sources[infos[i].Name]; s != nil && s.seed != nil {
			id = s.seed.ID
		}
		m.mu.Unlock()
		if id == 0 {
			continue
		}
		nodes, err := m.cat.SeedHolders(ctx, id)
		if err != nil {
			return
		}
		infos[i].Nodes = nodes
	}
}

func (m *Manager) sourceInfo(name string) SourceInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sources[name]
	if s == nil {
		return SourceInfo{Name: name}
	}
	info := SourceInfo{Name: name, Kind: s.src.Kind, CreatedAt: s.src.CreatedAt, Database: s.src.DefaultDatabase}
	if s.src.Kind == KindBranch {
		info.From = s.src.Spec // the other kinds' specs are files and URLs, with passwords
	}
	if s.seed != nil {
		info.Generation, info.PGVersion, info.Databases, info.SeededAt = s.seed.Generation, s.seed.PGVersion, s.seed.Databases, s.seed.ReadyAt
	}
	info.Warm, info.WarmSet = m.warmLocked(s), s.src.Warm
	for k, b := range m.branches {
		switch {
		case k.source != name:
		case b.rec.Pooled:
			info.Pooled++
		default:
			info.Branches++
		}
	}
	return info
}

// routerSources is the routing view of the sources, for route.
func (m *Manager) routerSources(route router.Route) []router.Source {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]router.Source, 0, len(m.sources))
	live := func(source, name string) bool {
		b := m.branches[key{source, name}]
		return name != "" && b != nil && !b.ended()
	}
	for n, s := range m.sources {
		rs := router.Source{Name: n, HasBranch: live(n, route.Branch), HasParent: live(n, route.Options.From),
			Derived: s.src.Kind == KindBranch}
		if s.seed != nil {
			rs.Databases = s.seed.Databases
		}
		out = append(out, rs)
	}
	return out
}

// seedByID finds a seed generation (branches keep theirs after a refresh).
func (m *Manager) seedByID(id int64) (catalog.Seed, error) {
	m.mu.Lock()
	for _, s := range m.sources {
		if s.seed != nil && s.seed.ID == id {
			sd := *s.seed
			m.mu.Unlock()
			return sd, nil
		}
	}
	m.mu.Unlock()
	seeds, err := m.cat.Seeds(context.Background())
	if err != nil {
		return catalog.Seed{}, err
	}
	for _, s := range seeds {
		if s.ID == id && s.State == catalog.SeedReady {
			return s, nil
		}
	}
	return catalog.Seed{}, fmt.Errorf("seed %d: %w", id, errNoSeed)
}

// urlDatabase is the database a connection URL or key=value string names, or "".
// Only the name is read: the string's other settings (files, services) are the
// base backup's business.
func urlDatabase(conn string) string {
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		u, err := url.Parse(conn)
		if err != nil {
			return ""
		}
		if db := u.Query().Get("dbname"); db != "" {
			return db
		}
		return strings.TrimPrefix(u.Path, "/")
	}
	return seed.ConnValues(conn)["dbname"]
}

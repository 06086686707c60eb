package branches

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/failpoint"
	"github.com/pgbranchproxy/pgbranchproxy/branches/overlay"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"github.com/pgbranchproxy/pgbranchproxy/branches/seed"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"
)

// Config configures a Manager.
type Config struct {
	// StateDir holds the catalog, seeds and branches. Required, absolute.
	StateDir string
	// Catalog is where the catalog lives instead of <StateDir>/catalog.db: a
	// postgres:// or postgresql:// URL, or a SQLite file (see catalog.Open). One
	// catalog serves one server; "" is the SQLite file in the state directory.
	Catalog string
	// Runtime runs branch servers. Required.
	Runtime runtime.Runtime
	// User owns branch data directories and runs their servers. Required.
	User runtime.OSUser
	// Builder builds seeds. Required.
	Builder *seed.Builder
	// ShimPath is the lazyrw library to preload into branch servers; "" runs them eager.
	ShimPath string
	// DefaultBranch is where a database name without "@" goes; "" refuses such names.
	DefaultBranch string
	// CreateTimeout bounds one creation or wake (default 2m); it is detached from
	// the clients that wait for it.
	CreateTimeout time.Duration
	// StopTimeout bounds a clean shutdown of one server before it is forced (default 30s).
	StopTimeout time.Duration
	// Settings are extra Postgres settings for every branch server.
	Settings map[string]string
	// Policy is what the reaper applies: idle stop, TTLs, quotas, budgets.
	Policy Policy
	// ReapInterval is how often the reaper runs (default 10s).
	ReapInterval time.Duration
	// Metrics, if set, receives counters and durations.
	Metrics *Metrics
	// MaxSessions caps the sessions of one branch; 0: no limit.
	MaxSessions int
	// MaxCreating caps creations running at once; others wait their turn (default 4).
	MaxCreating int
	// MaxLayers caps the read-only layers a branch of a branch is mounted with; a
	// fork that would need more flattens (fork.go). Default 32.
	MaxLayers int
	// MaxIdleServers caps the idle server sessions parked on one branch for reuse
	// (see Lease.Park); 0 parks none.
	MaxIdleServers int
	// ServerIdleTimeout closes server sessions parked longer than this (default 60s).
	ServerIdleTimeout time.Duration
	// ServerLogMax is how long a running branch server's log may grow before the
	// reaper rotates it (serverlog.go); 0: no limit.
	ServerLogMax int64
	// Failpoints injects faults at named steps, for tests; nil in production.
	Failpoints *failpoint.Set
	// Warm is how many branches each source keeps created and running for new branch
	// names to claim, unless the source says otherwise; 0: no pool.
	Warm int
	// Prewarm, if set, opens server sessions on pool members ahead of their clients.
	Prewarm Prewarmer
	// Join makes this server one node of several on a shared Postgres catalog
	// (serve --role node): it holds the catalog beside the others rather than
	// alone, and an empty state directory joins as a new node (joinCatalog).
	Join bool
	// NodeName is the node's name in the cluster (its certificate's), which a
	// joining node takes as its id; "" for none.
	NodeName string
	// Seeds fetches seeds from other nodes (package peer); on a node of several
	// with none, seeds are read where their builder put them (nodes on one disk).
	Seeds SeedFetcher
	// NodeDeadAfter is how long past its lease a node of the catalog must be before
	// this server's janitor declares it dead (node.go); default 60s.
	NodeDeadAfter time.Duration
}

// Manager finds, creates, wakes, stops, resets and destroys branches.
// The zero value is not usable; call New. Safe for concurrent use.
type Manager struct {
	cfg Config
	log *zap.Logger
	cat *catalog.Catalog

	usage overlay.Usage

	creating   chan struct{} // semaphore: creations running at once
	reapMu     sync.Mutex    // one reaper pass at a time
	lastPrune  time.Time     // when the logs were last pruned (retention.go); the reaper's loop only
	kick       chan struct{}
	refillDue  atomic.Bool        // a refill after claims is scheduled (pool.go)
	late       latePrewarm        // sessions ahead for keys first used after members were made (prewarm_late.go)
	reapDue    atomic.Bool        // a pass after held-back destroys is scheduled (burst.go)
	fetches    singleflight.Group // seeds being copied from other nodes (seedpull.go)
	fetching   map[int64]bool     // the seeds being copied; guarded by mu
	stopReaper context.CancelFunc // stops the reaper and the heartbeat
	life       context.Context    // ends when Close begins: seed copies run under it
	reaperDone chan struct{}
	beatKick   chan struct{}
	beatDone   chan struct{}
	restart    chan struct{} // closed when the node was declared dead (Restart)
	orphanDue  atomic.Bool   // compare the branches with the catalog at the next reaper pass (orphans.go)
	orphansAt  time.Time     // when they were last compared; the reaper's loop only

	mu         sync.Mutex
	closed     bool
	roomFreed  chan struct{} // closed when a session ends or an operation finishes (room.go)
	branches   map[key]*branch
	sources    map[string]*sourceState
	removing   map[string]bool               // sources RemoveSource is taking away, which syncSources leaves out
	running    *simplelru.LRU[key, struct{}] // running branches, least recently used first
	ownedTotal int64                         // as of the last reaper pass
	forks      forkState                     // fork_stopped.go

	proxyAddr   atomic.Pointer[string] // where clients connect, for connection strings
	proxySocket atomic.Pointer[string] // the proxy's unix socket, if it has one
	peerAddr    atomic.Pointer[string] // where other nodes fetch this node's seeds
	lock        *os.File               // the state directory's lock (statelock.go)
	disown      func()                 // gives up the catalog (catalog.Own)
}

type key struct{ source, name string }

// branch is the live state of one branch. Every field is guarded by Manager.mu;
// while op is set, only that operation changes rec and inst.
type branch struct {
	rec      catalog.Branch
	inst     runtime.Instance
	sessions int
	peak     int // the most sessions it had at once
	internal int // of sessions, the engine's own (a fork's, a diff's): Force does not end them
	op       *op
	ops      uint64 // operations started on the branch, to tell a stale measurement

	overQuota    bool      // refuse new sessions (set by the reaper)
	fenced       bool      // the catalog row is no longer this node's (fence.go): refuse sessions
	hadSession   bool      // an ephemeral branch goes when its last session ends, not before its first
	measuredAt   time.Time // when OwnedBytes was last measured
	persistedUse time.Time // the LastUsedAt the catalog has
	rolesAt      time.Time // when the roles were last read from the running server
	rolesRead    time.Time // when the last read of the roles that completed began (forkbase.go)

	idle      map[string][]parkedConn // parked server sessions by startup key, oldest first
	idleCount int
	// idleEpoch counts DropAllIdle calls: a server session whose client came
	// before the last one is not parked.
	idleEpoch int64
}

// op is one lifecycle operation in flight. done is closed when it ends; err is set before.
type op struct {
	what string
	done chan struct{}
	err  error
}

type sourceState struct {
	src  catalog.Source
	seed *catalog.Seed  // the newest ready seed; nil while the first one builds
	keys map[string]int // startup keys its clients used, with counts

	lastClaim time.Time           // when a connection last claimed one of its pool members
	pace      poolPace            // how fast its pool is claimed in a burst and refilled
	use       claimUse            // how its claimed members were used
	holds     map[string]warmHold // by id: members asked for until a time (poolhold.go)
}

// New opens the catalog in cfg.StateDir, reconciles what a previous run left behind
// and returns a ready Manager.
func New(ctx context.Context, cfg Config, log *zap.Logger) (*Manager, error) {
	if !filepath.IsAbs(cfg.StateDir) {
		return nil, fmt.Errorf("state dir %q must be an absolute path", cfg.StateDir)
	}
	if err := overlay.ValidPath(cfg.StateDir); err != nil {
		return nil, err
	}
	if cfg.Runtime == nil || cfg.Builder == nil {
		return nil, errors.New("branches: Runtime and Builder are required")
	}
	if cfg.CreateTimeout <= 0 {
		cfg.CreateTimeout = 2 * time.Minute
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 30 * time.Second
	}
	if cfg.MaxCreating <= 0 {
		cfg.MaxCreating = 4
	}
	if cfg.ReapInterval <= 0 {
		cfg.ReapInterval = 10 * time.Second
	}
	if cfg.ServerIdleTimeout <= 0 {
		cfg.ServerIdleTimeout = time.Minute
	}
	if cfg.NodeDeadAfter <= 0 {
		cfg.NodeDeadAfter = time.Minute
	}
	switch cfg.Policy.QuotaPolicy {
	case "":
		cfg.Policy.QuotaPolicy = QuotaReset
	case QuotaReset, QuotaRefuse:
	default:
		return nil, fmt.Errorf("quota policy %q: want reset or refuse", cfg.Policy.QuotaPolicy)
	}
	if cfg.DefaultBranch != "" && !router.ValidBranchName(cfg.DefaultBranch) {
		return nil, fmt.Errorf("default branch %q is not a valid branch name", cfg.DefaultBranch)
	}
	if err := makeDirs(cfg.StateDir); err != nil {
		return nil, err
	}
	lock, err := LockStateDir(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	m, err := open(ctx, cfg, log)
	if err != nil {
		lock.Close()
		return nil, err
	}
	m.lock = lock
	return m, nil
}

// open opens the catalog, reconciles and starts the reaper; New holds the state
// directory's lock.
func open(ctx context.Context, cfg Config, log *zap.Logger) (*Manager, error) {
	if cfg.Catalog == "" {
		cfg.Catalog = filepath.Join(cfg.StateDir, "catalog.db")
	}
	cat, err := catalog.Open(cfg.Catalog)
	if err != nil {
		return nil, err
	}
	log.Info("catalog", zap.String("backend", cat.Backend()), zap.String("at", catalog.Redact(cfg.Catalog)))
	disown, err := ownCatalog(ctx, cat, cfg)
	if err != nil {
		cat.Close()
		return nil, err
	}
	if err := registerNode(ctx, cat, cfg.StateDir, log); err != nil {
		disown()
		cat.Close()
		return nil, err
	}
	running, _ := simplelru.NewLRU[key, struct{}](math.MaxInt32, nil)
	m := &Manager{cfg: cfg, log: log, cat: cat, branches: map[key]*branch{}, sources: map[string]*sourceState{},
		running: running, kick: make(chan struct{}, 1), reaperDone: make(chan struct{}),
		beatKick: make(chan struct{}, 1), beatDone: make(chan struct{}), restart: make(chan struct{}),
		creating: make(chan struct{}, cfg.MaxCreating), disown: disown}
	if err := m.reconcile(ctx); err != nil {
		disown()
		cat.Close()
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	mode, err := overlay.ProbeCopyUp(filepath.Join(cfg.StateDir, "probe"))
	if err != nil {
		disown()
		cat.Close()
		return nil, fmt.Errorf("probe OverlayFS copy-up under %s: %w", cfg.StateDir, err)
	}
	m.usage = overlay.Usage{Mode: mode}
	log.Info("copy-up probe", zap.String("mode", mode), zap.String("owned_bytes", map[string]string{
		overlay.CopyUpCopy: "allocated blocks of each upper layer", overlay.CopyUpClone: "exclusive extents of each upper layer"}[mode]))
	for _, b := range m.branches {
		b.persistedUse = b.rec.LastUsedAt
	}
	// The branches by state are in /metrics from the start, not from the first
	// reaper pass (--reap-interval later).
	m.updateGauges()
	rctx, cancel := context.WithCancel(context.Background())
	m.stopReaper, m.life = cancel, rctx
	go m.reaper(rctx)
	go m.heartbeat(rctx)
	m.refillPools()
	return m, nil
}

// makeDirs creates the state directory layout. The OS user Postgres runs as must be
// able to traverse to branch data directories, but never to the seeds, which only
// the overlay mounts (as root) read.
func makeDirs(state string) error {
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{state, 0o711}, {filepath.Join(state, "seeds"), 0o700}, {filepath.Join(state, "build"), 0o711}, {filepath.Join(state, "branches"), 0o711}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return err
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return err
		}
	}
	return nil
}

// Close stops every branch server cleanly and unmounts every branch. Sessions should
// have been ended first; their servers are stopped regardless.
func (m *Manager) Close(ctx context.Context) error {
	m.stopReaper()
	<-m.reaperDone
	<-m.beatDone
	m.mu.Lock()
	m.closed = true
	var pending []*op
	for _, b := range m.branches {
		if b.op != nil {
			pending = append(pending, b.op)
		}
	}
	m.mu.Unlock()
	for _, o := range pending {
		select {
		case <-o.done:
		case <-ctx.Done():
		}
	}
	var wg sync.WaitGroup
	m.mu.Lock()
	for _, b := range m.branches {
		if b.inst == nil && (b.rec.State != catalog.Running || b.fenced) {
			continue // nothing runs, or stopLocal stopped it: its stop is not this node's to record
		}
		b := b
		wg.Add(1)
		ended := b.ended()
		go func() {
			defer wg.Done()
			if ended {
				// Its destroy waited out a burst of claims (burst.go): done now
				// rather than left to the next run's reaper.
				err := m.destroyBranch(ctx, b, endedReason)
				if err == nil {
					return
				}
				m.log.Error("destroy ended ephemeral branch at shutdown", zap.String("branch", b.rec.Name), zap.Error(err))
			}
			if err := m.stopBranch(ctx, b, "server shutdown"); err != nil {
				m.log.Error("stop branch at shutdown", zap.String("branch", b.rec.Name), zap.Error(err))
				// Whatever kept the stop from being recorded (a row not this node's, a
				// catalog that cannot be reached), the server stops all the same:
				// stopLocal writes nothing, and the next start reconciles a row that
				// still says running.
				m.stopLocal(ctx, b)
			}
		}()
	}
	m.mu.Unlock()
	wg.Wait()
	m.mu.Lock()
	touched := map[int64]time.Time{}
	for _, b := range m.branches {
		if b.rec.ID != 0 && !b.rec.LastUsedAt.Equal(b.persistedUse) {
			touched[b.rec.ID] = b.rec.LastUsedAt
		}
	}
	m.mu.Unlock()
	if err := m.cat.Touch(ctx, touched); err != nil {
		m.log.Warn("record last use", zap.Error(err))
	}
	m.disown()
	err := m.cat.Close()
	if m.lock != nil {
		m.lock.Close() // the next serve may have the directory
	}
	return err
}

func (m *Manager) branchDir(id int64) string {
	return filepath.Join(m.cfg.StateDir, "branches", fmt.Sprint(id))
}

// layout is where a branch's directories are.
type layout struct {
	dir, upper, work, data, run, log string
}

func (m *Manager) layoutOf(id int64) layout {
	d := m.branchDir(id)
	return layout{dir: d, upper: filepath.Join(d, "upper"), work: filepath.Join(d, "work"),
		data: filepath.Join(d, "data"), run: filepath.Join(d, "run"), log: filepath.Join(d, "postgres.log")}
}

// probe is the file the lazyrw shim writes in a server it loaded in.
func (l layout) probe() string { return filepath.Join(l.run, "lazyrw.active") }

func (m *Manager) now() time.Time { return time.Now().UTC() }

// ServerInfo describes how this manager runs branches.
type ServerInfo struct {
	StateDir   string `json:"state_dir"`
	CopyUpMode string `json:"copy_up_mode"`          // "copy" or "clone"
	LazyRW     bool   `json:"lazyrw"`                // the shim is configured (each branch reports what it got)
	Listen     string `json:"listen"`                // the proxy's listen address ("" before it listens)
	UnixSocket string `json:"unix_socket,omitempty"` // the proxy's unix socket (--unix-socket-dir), if any
	Node       string `json:"node"`                  // this server's node id in the catalog: the state directory's id
	NodeEpoch  int64  `json:"node_epoch"`            // +1 at every start
	NodeLost   bool   `json:"node_lost,omitempty"`   // the catalog found the registration gone: branches stopped, restart serve
}

// Info describes how this manager runs branches.
func (m *Manager) Info() ServerInfo {
	node, epoch, _ := m.cat.Registration()
	return ServerInfo{StateDir: m.cfg.StateDir, CopyUpMode: m.usage.Mode, LazyRW: m.cfg.ShimPath != "", Listen: m.ProxyAddr(),
		UnixSocket: m.ProxySocket(), Node: node, NodeEpoch: epoch, NodeLost: m.cat.NodeLost()}
}

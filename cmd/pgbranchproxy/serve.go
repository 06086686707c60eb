package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"github.com/pgbranchproxy/pgbranchproxy/branches/seed"
	"github.com/pgbranchproxy/pgbranchproxy/cluster"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

type serveFlags struct {
	authSet        bool // --auth was given
	role           string
	advertise      string
	peerListen     string
	clusterDir     string
	clusterName    string
	listen         string
	unixSocketDir  string
	catalog        string
	auth           string
	pgBin          string
	pgUser         string
	shim           string
	lazyrw         string
	defaultBranch  string
	startupTimeout time.Duration
	createTimeout  time.Duration
	grace          time.Duration
	logFormat      string
	logLevel       string
	pgSettings     []string
	policy         branches.Policy
	diskBudget     string
	serverLogMax   int64
	reapInterval   time.Duration
	nodeDeadAfter  time.Duration
	metricsListen  string
	insecureTrust  bool
	tlsCert        string
	tlsKey         string
	tlsAuto        bool
	tlsMode        string
	maxClientConns int
	maxSessions    int
	maxCreating    int
	maxLayers      int
	writeTimeout   time.Duration
	adminListen    string
	adminToken     string
	failedLogins   int
	relay          string
	relayFailLoad  bool
	reuseFlags
	runtime runtimeFlags
}

func newServe(g *globalFlags) *cobra.Command {
	f := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the proxy in the foreground",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.authSet = cmd.Flags().Changed("auth")
			return serve(g, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.role, "role", roleAll, "all (one host: routing and branches in this process), front (authenticate and route to the nodes of a shared --catalog postgres://…) or node (run branches for fronts; sessions are trusted)")
	fl.StringVar(&f.clusterDir, "cluster-dir", "", "with --role front or node: the cluster directory (cluster init) whose CA and this member's certificate secure front-to-node sessions with mutual TLS")
	fl.StringVar(&f.clusterName, "cluster-name", "", "with --cluster-dir: this member's name (cluster issue --name); a new node takes it as its node id")
	fl.StringVar(&f.advertise, "advertise", "", "with --role node: the address fronts reach this node at (default: the --listen address)")
	fl.StringVar(&f.peerListen, "peer-listen", "", "with --role node: where the other nodes fetch this node's seeds (default: the --listen host, a port the system picks), with the cluster's mutual TLS")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:6432", "address clients connect to")
	fl.StringVar(&f.unixSocketDir, "unix-socket-dir", "", "also take clients on a unix socket in this directory, named as Postgres names its own (.s.PGSQL.<the --listen port>): psql -h DIR -p PORT")
	fl.StringVar(&f.catalog, "catalog", "", "the catalog: a postgres:// URL, or a SQLite file (default: <state-dir>/catalog.db); the state dir holds everything else")
	fl.StringVar(&f.auth, "auth", proxy.AuthSCRAM, "client authentication at the proxy, before any branch is created or woken: scram-sha-256, md5 or trust")
	fl.BoolVar(&f.insecureTrust, "insecure-trust", false, "allow --auth trust on a non-loopback --listen")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate file (PEM)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "TLS private key file (PEM)")
	fl.BoolVar(&f.tlsAuto, "tls-auto", false, "make a CA and a server certificate under <state-dir>/tls (clients verify with tls/ca.crt)")
	fl.StringVar(&f.tlsMode, "tls-mode", "", "disable, allow or require (default: allow with a certificate, else disable)")
	fl.IntVar(&f.maxClientConns, "max-client-conns", 0, "client connections at once, logged in or not; more get 53300 (0: a quarter of the open-file limit; negative: no limit)")
	fl.IntVar(&f.maxSessions, "max-sessions", 0, "sessions per branch; more get 53300 (0: no limit)")
	fl.IntVar(&f.maxCreating, "max-creating", 4, "branch creations at once; more wait their turn")
	fl.IntVar(&f.maxLayers, "max-layers", 32, "read-only layers a branch of a branch may be mounted with; deeper forks flatten")
	positiveDurationVar(fl, &f.writeTimeout, "client-write-timeout", time.Minute, "cut off a client that does not read its results for this long")
	fl.StringVar(&f.adminListen, "admin-listen", "", "also serve the admin API on this TCP address, to bearer tokens (--admin-token, token create)")
	fl.StringVar(&f.adminToken, "admin-token", "", "bearer token of role admin for --admin-listen, named bootstrap (or PGBRANCH_ADMIN_TOKEN; at least 16 characters)")
	f.reuseFlags.register(fl)
	fl.StringVar(&f.relay, "relay", proxy.RelayEpoll, "how plaintext sessions are relayed after login: epoll (an epoll loop, the default), auto (kernel where it loads, else epoll), kernel (BPF sockmap; refuse to start without it) or goroutine (two goroutines a session; TLS sessions always use these)")
	fl.BoolVar(&f.relayFailLoad, "relay-simulate-load-failure", false, "act as if the kernel refused the kernel relay's programs (for tests)")
	fl.MarkHidden("relay-simulate-load-failure")
	fl.IntVar(&f.failedLogins, "max-failed-logins", 20, "failed logins per minute from one address before it is refused (negative: no limit)")
	fl.StringVar(&f.pgBin, "pg-bin", "", "directory of the PostgreSQL server binaries (default: pg_config's, else /usr/lib/postgresql/<major>/bin)")
	fl.StringVar(&f.pgUser, "pg-user", "postgres", "unprivileged OS user that runs branch servers")
	fl.StringVar(&f.shim, "shim", "", "path of liblazyrw.so (default: next to this binary)")
	fl.StringVar(&f.lazyrw, "lazyrw", "on", "load the lazyrw shim so reads never copy files up: on or off")
	fl.StringVar(&f.defaultBranch, "default-branch", "main", "branch for a database name without @BRANCH (empty: refuse such names)")
	positiveDurationVar(fl, &f.startupTimeout, "startup-timeout", 60*time.Second, "how long a client waits for its branch to be created or woken before 57P03")
	positiveDurationVar(fl, &f.createTimeout, "create-timeout", 2*time.Minute, "bound on one branch creation or wake")
	durationVar(fl, &f.grace, "grace", 10*time.Second, "on SIGTERM, how long sessions may go on before they are closed")
	fl.StringVar(&f.logFormat, "log-format", "console", "log format: console or json")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fl.StringArrayVar(&f.pgSettings, "pg-setting", nil, "NAME=VALUE setting for every branch server (repeatable)")
	durationVar(fl, &f.policy.IdleStop, "idle-stop", 5*time.Minute, "stop a branch's server after this long without sessions (0: never); the next connection wakes it")
	fl.Var(durationFlag{p: &f.policy.TTL}, "ttl", "destroy a branch after this long without a session: 90m, 12h, 7d (0: never; per branch: -c pgbranch.ttl, branch set --ttl)")
	fl.Var(durationFlag{p: &f.policy.MaxAge}, "max-age", "destroy a branch this long after its creation, once it has no session: 12h, 30d (0: never)")
	fl.Var(sizeFlag{&f.policy.Quota}, "quota", "bytes a branch may own (0: no limit; per branch: -c pgbranch.quota, branch set --quota)")
	fl.StringVar(&f.policy.QuotaPolicy, "quota-policy", branches.QuotaReset, "over quota: reset (when its sessions end) or refuse (until reset or destroyed)")
	fl.StringVar(&f.diskBudget, "disk-budget", "0", "bytes (e.g. 50GB) or percent of the state dir's filesystem (e.g. 80%) all branches may own; 0: no limit")
	fl.Var(sizeFlag{&f.policy.DiskReserve}, "disk-reserve", "kept free below --disk-budget")
	fl.IntVar(&f.policy.MaxRunning, "max-running", 0, "branch servers running at once; the least recently used idle one is stopped to make room (0: no limit)")
	f.policy.HistoryKeep = 90 * 24 * time.Hour
	fl.Var(durationFlag{p: &f.policy.HistoryKeep}, "history-keep", "delete branch transitions (branch log) older than this: 30d, 2160h (0: keep them all)")
	fl.Var(durationFlag{p: &f.policy.AuditKeep}, "audit-keep", "delete audit log entries older than this: 365d (0: keep them all)")
	positiveDurationVar(fl, &f.reapInterval, "reap-interval", 10*time.Second, "how often idle stop, TTLs, quotas and budgets are applied")
	f.serverLogMax = 16 << 20
	fl.Var(sizeFlag{&f.serverLogMax}, "server-log-max", "a running branch server's postgres.log past this is moved to postgres.log.1 at the next reaper pass (0: no limit)")
	positiveDurationVar(fl, &f.nodeDeadAfter, "node-dead-after", time.Minute, "declare a node of the catalog dead, and its branches lost, this long after its lease ran out")
	fl.StringVar(&f.metricsListen, "metrics-listen", "", "also serve /metrics and /healthz on this TCP address")
	addRuntimeFlags(fl, &f.runtime)
	return cmd
}

func newLogger(format, level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	var cfg zap.Config
	switch format {
	case "json":
		cfg = zap.NewProductionConfig()
	case "console":
		cfg = zap.NewDevelopmentConfig()
		cfg.Development = false
		cfg.DisableStacktrace = true
	default:
		return nil, fmt.Errorf("--log-format must be console or json, not %q", format)
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.OutputPaths, cfg.ErrorOutputPaths = []string{"stderr"}, []string{"stderr"}
	return cfg.Build()
}

func serve(g *globalFlags, f *serveFlags) error {
	if f.role == roleFront {
		return serveFront(g, f)
	}
	if err := checkNodeRole(f); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("serve must run as root: it mounts OverlayFS and starts Postgres as --pg-user")
	}
	member, err := loadMember(f, cluster.RoleNode)
	if err != nil {
		return err
	}
	settings, err := checkServeFlags(f, member != nil)
	if err != nil {
		return err
	}
	stateDir, err := filepath.Abs(g.stateDir)
	if err != nil {
		return err
	}
	user, err := runtime.LookupUser(f.pgUser)
	if err != nil {
		return err
	}
	if err := checkTraversable(stateDir, user); err != nil {
		return err
	}
	log, err := newLogger(f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	defer log.Sync()
	if err := os.MkdirAll(stateDir, 0o711); err != nil {
		return err
	}
	if f.policy.DiskBudget, err = parseBudget(f.diskBudget, stateDir); err != nil {
		return err
	}
	if err := checkReserve(f); err != nil {
		return err
	}
	tlsCfg, err := serveTLS(f, member, stateDir, log)
	if err != nil {
		return err
	}
	shim := ""
	if f.lazyrw == "on" {
		if shim, err = installShim(f.shim, stateDir); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	metrics := branches.NewMetrics()
	mgr, err := newManager(ctx, f, member, stateDir, user, shim, settings, metrics, log)
	if err != nil {
		return err
	}
	logPolicy(log, f) // once the engine runs: a start refused before says one line only
	serving := false  // from then on, the shutdown below closes mgr
	defer func() {
		if !serving {
			mgr.Close(context.Background())
		}
	}()
	px, err := newProxy(f, tlsCfg, mgr, log)
	if err != nil {
		return err
	}
	metricsHandler := newMetricsHandler(metrics, &px.Stats, px.RelayStats())
	if f.metricsListen != "" {
		stopMetrics, err := serveMetrics(f.metricsListen, metricsHandler)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	api, err := admin.New(admin.Config{Manager: mgr, Store: mgr.Catalog(), Metrics: metricsHandler, Bootstrap: f.adminToken}, log.Named("admin"))
	if err != nil {
		return err
	}
	adminSock := filepath.Join(stateDir, "admin.sock")
	stopAdmin, err := serveAdmin(api, adminSock, f)
	if err != nil {
		return err
	}
	defer stopAdmin()
	if f.role == roleNode {
		stopPeer, err := startPeer(f, member, mgr, api, log.Named("peer"))
		if err != nil {
			return err
		}
		defer stopPeer()
	}
	lns, err := listenClients(ctx, f)
	if err != nil {
		return err
	}
	mgr.SetProxyAddr(cmpOr(f.advertise, lns[0].Addr().String()))
	if len(lns) > 1 {
		mgr.SetProxySocket(lns[1].Addr().String())
	}
	fields := []zap.Field{zap.String("listen", lns[0].Addr().String()), zap.String("state_dir", stateDir),
		zap.String("admin", adminSock), zap.Bool("lazyrw", shim != ""), unixSocketField(lns), zap.Int("max_client_conns", px.MaxClientConns())}
	log.Info("pgbranchproxy ready", append(fields, servingFields(f)...)...)
	serving = true
	err = serveUntilDone(ctx, stop, px, lns, mgr.Restart(), log)
	shutDown(f.grace, px, mgr, log)
	return err
}

// checkNodeRole checks the flags of --role node and sets what a node implies;
// --role all needs nothing.
func checkNodeRole(f *serveFlags) error {
	switch f.role {
	case roleAll:
		return nil
	case roleNode:
	default:
		return fmt.Errorf("--role must be all, front or node, not %q", f.role)
	}
	if !catalog.IsPostgres(f.catalog) {
		return errors.New("--role node needs --catalog postgres://…: nodes and fronts share one catalog")
	}
	if f.authSet && f.auth != proxy.AuthTrust {
		return errors.New("a node does not authenticate clients, its fronts do: --auth is for --role front (and all)")
	}
	if f.advertise == "" && unspecifiedHost(f.listen) {
		return fmt.Errorf("--listen %s is no address a front can dial: give --advertise HOST:PORT", f.listen)
	}
	if f.unixSocketDir != "" {
		return errors.New("a node serves its fronts only, over TCP: --unix-socket-dir is for --role front (and all)")
	}
	// Fronts authenticate; a node trusts the sessions they open.
	f.auth = proxy.AuthTrust
	return nil
}

// checkServeFlags checks the flags that need no state directory, and returns the
// --pg-setting values. mtls: the server is a cluster member (a node).
func checkServeFlags(f *serveFlags, mtls bool) (map[string]string, error) {
	if err := checkProxyFlags(f, mtls); err != nil {
		return nil, err
	}
	if err := f.reuseFlags.validate(); err != nil {
		return nil, err
	}
	if err := checkCounts(f); err != nil {
		return nil, err
	}
	if f.adminToken != "" && len(f.adminToken) < 16 {
		return nil, errors.New("--admin-token (or PGBRANCH_ADMIN_TOKEN) must have at least 16 characters")
	}
	if f.lazyrw != "on" && f.lazyrw != "off" {
		return nil, fmt.Errorf("--lazyrw must be on or off, not %q", f.lazyrw)
	}
	settings := map[string]string{}
	for _, s := range f.pgSettings {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--pg-setting %q: want NAME=VALUE", s)
		}
		settings[k] = v
	}
	if err := checkLimitFlags(f.runtime, settings); err != nil {
		return nil, err
	}
	return settings, nil
}

// serveTLS is the client listener's TLS configuration (nil: none), logged with
// its certificate's fingerprint: --tls-cert/--tls-key or --tls-auto, or on a node
// the cluster's certificates, which its fronts must present.
func serveTLS(f *serveFlags, member *cluster.Member, stateDir string, log *zap.Logger) (*tls.Config, error) {
	tlsCfg, fp, err := loadTLS(f.tlsCert, f.tlsKey, f.tlsAuto, stateDir, f.listen)
	if err != nil {
		return nil, err
	}
	if member != nil {
		// A node's only clients are fronts, with the cluster's certificates.
		if tlsCfg, fp, err = memberTLS(member); err != nil {
			return nil, err
		}
		f.tlsMode = proxy.TLSRequire
	}
	if tlsCfg == nil && (f.tlsMode == proxy.TLSAllow || f.tlsMode == proxy.TLSRequire) {
		return nil, fmt.Errorf("--tls-mode %s needs --tls-cert and --tls-key, or --tls-auto", f.tlsMode)
	}
	if tlsCfg != nil {
		fields := []zap.Field{zap.String("sha256_fingerprint", fp), zap.String("mode", cmpOr(f.tlsMode, proxy.TLSAllow))}
		if member != nil {
			fields = append(fields, zap.String("cluster_member", member.Name))
		}
		log.Info("TLS", fields...)
	}
	return tlsCfg, nil
}

// newManager starts the branch engine on stateDir with serve's flags.
func newManager(ctx context.Context, f *serveFlags, member *cluster.Member, stateDir string, user runtime.OSUser,
	shim string, settings map[string]string, metrics *branches.Metrics, log *zap.Logger) (*branches.Manager, error) {
	fps, err := loadFailpoints(log)
	if err != nil {
		return nil, err
	}
	rt, err := newRuntime(ctx, f.runtime, stateDir, runtime.Binaries{Dir: f.pgBin}, user, log.Named("runtime"))
	if err != nil {
		return nil, err
	}
	return branches.New(ctx, branches.Config{
		StateDir:      stateDir,
		Catalog:       f.catalog,
		Runtime:       rt,
		User:          user,
		Builder:       seed.NewBuilder(rt, log.Named("seed")),
		ShimPath:      shim,
		DefaultBranch: f.defaultBranch,
		CreateTimeout: f.createTimeout,
		Settings:      settings,
		Policy:        f.policy,
		ReapInterval:  f.reapInterval,
		Metrics:       metrics,
		MaxSessions:   f.maxSessions,
		MaxCreating:   f.maxCreating,
		MaxLayers:     f.maxLayers,

		MaxIdleServers:    f.idleServers(),
		ServerIdleTimeout: f.serverIdleTimeout,
		ServerLogMax:      f.serverLogMax,
		Failpoints:        fps,
		Warm:              f.warm,
		Prewarm:           prewarmer{users: f.warmUsers},
		NodeDeadAfter:     f.nodeDeadAfter,
		Join:              f.role == roleNode,
		NodeName:          memberName(member),
		Seeds:             nodeSeedFetcher(f, member),
	}, log.Named("branches"))
}

// newProxy is the client-facing server in front of mgr.
func newProxy(f *serveFlags, tlsCfg *tls.Config, mgr *branches.Manager, log *zap.Logger) (*proxy.Server, error) {
	return proxy.New(proxy.Config{
		DefaultBranch:   f.defaultBranch,
		AcquireTimeout:  f.startupTimeout,
		Auth:            f.auth,
		TLS:             tlsCfg,
		TLSMode:         f.tlsMode,
		MaxClientConns:  f.maxClientConns,
		WriteTimeout:    f.writeTimeout,
		FailedLogins:    f.failedLogins,
		Relay:           f.relay,
		KernelLoadFails: f.relayFailLoad,
		Reuse:           f.idleServers() > 0,
		KeepConns:       f.role == roleNode,
		ServerLifetime:  f.serverLifetime,
		AuthSecret:      authSecret(mgr.Catalog(), log),
	}, branchesAdapter{mgr}, log.Named("proxy"))
}

// shutDown lets the sessions run for grace, then stops the branch servers under
// the sessions left, so that their clients get 57P01 (admin shutdown) rather than
// a dropped connection, and closes the proxy.
func shutDown(grace time.Duration, px *proxy.Server, mgr *branches.Manager, log *zap.Logger) {
	log.Info("shutting down", zap.Duration("grace", grace))
	graceCtx, cancel := context.WithTimeout(context.Background(), grace)
	if !px.Drain(graceCtx) {
		log.Info("grace period over: stopping branch servers under the sessions left")
	}
	cancel()
	closeCtx, cancel := context.WithTimeout(context.Background(), serverStopBound)
	defer cancel()
	if cerr := mgr.Close(closeCtx); cerr != nil {
		log.Error("close branches", zap.Error(cerr))
	}
	forceCtx, cancelForce := context.WithTimeout(context.Background(), shutdownBound)
	px.Shutdown(forceCtx)
	cancelForce()
	log.Info("stopped")
}

// How long serve's stop may take after --grace: the branch servers' shutdown, then
// the sessions and listeners left (deploy/systemd's TimeoutStopSec covers both).
const (
	serverStopBound = 2 * time.Minute
	shutdownBound   = 5 * time.Second
)

// serveAdmin serves api on the admin socket sock ("" for none), to its owner,
// and on --admin-listen, to tokens, with the web page; stop closes both and
// removes the socket.
func serveAdmin(api *admin.API, sock string, f *serveFlags) (stop func(), err error) {
	stopLocal := func() {}
	if sock != "" {
		os.Remove(sock)
		ln, err := net.Listen("unix", sock)
		if err != nil {
			return nil, fmt.Errorf("admin socket: %w", err)
		}
		os.Chmod(sock, 0o600)
		local := &http.Server{Handler: admin.WithPage(api.Local(), f.listen), ReadHeaderTimeout: 10 * time.Second}
		go local.Serve(ln)
		stopLocal = func() { local.Close(); os.Remove(sock) }
	}
	if f.adminListen == "" {
		return stopLocal, nil
	}
	aln, err := net.Listen("tcp", f.adminListen)
	if err != nil {
		stopLocal()
		return nil, fmt.Errorf("--admin-listen: %w", err)
	}
	remote := &http.Server{Handler: admin.WithPage(api.Remote(), f.listen), ReadHeaderTimeout: 10 * time.Second}
	go remote.Serve(aln)
	return func() { remote.Close(); stopLocal() }, nil
}

// serveUntilDone serves px on lns until ctx ends (a signal), the proxy stops by
// itself, or restart is closed (a node declared dead; nil for none); the last
// two end ctx (stop) and return an error. A service manager is told when serve is
// ready and when it begins to stop (notify).
func serveUntilDone(ctx context.Context, stop func(), px *proxy.Server, lns []net.Listener, restart <-chan struct{}, log *zap.Logger) error {
	serveErr := make(chan error, len(lns))
	for _, ln := range lns {
		go func() { serveErr <- px.Serve(ctx, ln) }()
	}
	notify("READY=1\nSTATUS=taking clients on " + lns[0].Addr().String())
	defer notify("STOPPING=1")
	select {
	case <-ctx.Done():
		return nil
	case err := <-serveErr:
		log.Error("proxy stopped", zap.Error(err))
		stop()
		return err
	case <-restart:
		if ctx.Err() != nil {
			return nil // a signal came first: a plain stop
		}
		log.Error("the catalog's janitor declared this node dead while it could not renew its lease; its branch servers " +
			"are stopped: exiting, for its supervisor to start it again under a new registration")
		stop()
		return errRestart
	}
}

// checkProxyFlags checks the flags of the client-facing proxy, for every role.
// mtls: clients must show a cluster certificate (a node's fronts).
func checkProxyFlags(f *serveFlags, mtls bool) error {
	// An empty address (PGBRANCH_LISTEN= over the config file's) would listen on
	// every interface at a port the system picks.
	if _, _, err := net.SplitHostPort(f.listen); err != nil {
		return fmt.Errorf("--listen %q: want HOST:PORT, e.g. 127.0.0.1:6432 (or :6432 for every address)", f.listen)
	}
	switch f.auth {
	case proxy.AuthSCRAM, proxy.AuthMD5:
	case proxy.AuthTrust:
		if !f.insecureTrust && !mtls && !loopbackListen(f.listen) {
			if f.role == roleNode {
				return fmt.Errorf("a node on %s without --cluster-dir would serve anyone who reaches it: give it the cluster's certificates, listen on loopback, or pass --insecure-trust (a private network only fronts reach)", f.listen)
			}
			return fmt.Errorf("--auth trust on %s would let anyone who reaches it create branches: listen on loopback, or pass --insecure-trust", f.listen)
		}
	default:
		return fmt.Errorf("--auth must be scram-sha-256, md5 or trust, not %q", f.auth)
	}
	if err := checkFailedLogins(f); err != nil {
		return err
	}
	switch f.relay {
	case "pump":
		f.relay = proxy.RelayEpoll
	case proxy.RelayAuto, proxy.RelayKernel, proxy.RelayEpoll, proxy.RelayGoroutine:
	default:
		return fmt.Errorf("--relay must be auto, kernel, epoll or goroutine, not %q", f.relay)
	}
	return nil
}

// branchesAdapter gives the proxy the small interface it declares.
type branchesAdapter struct{ m *branches.Manager }

func (a branchesAdapter) Roles(ctx context.Context, r router.Route) (roles.Set, error) {
	return a.m.Roles(ctx, r)
}

func (a branchesAdapter) Acquire(ctx context.Context, r router.Route) (proxy.Lease, error) {
	l, err := a.m.Acquire(ctx, r)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// installShim copies the lazyrw library into the state directory, where the
// Postgres user can always read it, and returns that path.
func installShim(path, stateDir string) (string, error) {
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", err
		}
		path = filepath.Join(filepath.Dir(exe), "liblazyrw.so")
	}
	src, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("lazyrw shim: %w (build it with make, pass --shim, or run with --lazyrw=off)", err)
	}
	defer src.Close()
	lib := filepath.Join(stateDir, "lib")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(lib, "liblazyrw.so")
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, src); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	// Rename, never overwrite in place: running servers have the old file mapped.
	return dst, os.Rename(tmp, dst)
}

// checkTraversable makes sure user can reach directories under dir: every existing
// ancestor must be searchable by it.
func checkTraversable(dir string, u runtime.OSUser) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err == nil {
			sys := st.Sys().(*syscall.Stat_t)
			mode := st.Mode().Perm()
			ok := mode&0o001 != 0 || (int(sys.Uid) == u.UID && mode&0o100 != 0) || (int(sys.Gid) == u.GID && mode&0o010 != 0)
			if !ok {
				return fmt.Errorf("%s is not searchable by OS user %s, which must reach the branch data directories under --state-dir: chmod o+x %s or choose another --state-dir", p, u.Name, p)
			}
		}
		if p == "/" {
			return nil
		}
	}
}

// parseBudget reads --disk-budget: a size, or a percentage of the size of the
// filesystem holding stateDir.
func parseBudget(v, stateDir string) (int64, error) {
	if pct, ok := strings.CutSuffix(strings.TrimSpace(v), "%"); ok {
		p, err := strconv.ParseFloat(pct, 64)
		if err != nil || p <= 0 || p > 100 {
			return 0, fmt.Errorf("--disk-budget %q: want a percentage in (0, 100]", v)
		}
		var st syscall.Statfs_t
		if err := syscall.Statfs(stateDir, &st); err != nil {
			return 0, err
		}
		return int64(float64(st.Blocks) * float64(st.Bsize) * p / 100), nil
	}
	n, ok := router.ParseSize(v)
	if !ok {
		return 0, fmt.Errorf("--disk-budget %q: want a size such as 50GB or a percentage such as 80%%", v)
	}
	return n, nil
}

// unspecifiedHost reports whether addr listens on every address (0.0.0.0, ::
// or no host), which is no address to dial.
func unspecifiedHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}

// loopbackListen reports whether addr listens on loopback only.
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// The proxy closes parked sessions of a branch whose server has no slot left.
var _ proxy.IdleDropper = (*branches.Lease)(nil)
var _ proxy.AllIdleDropper = (*branches.Lease)(nil)

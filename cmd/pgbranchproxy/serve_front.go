package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/cluster"
	"github.com/pgbranchproxy/pgbranchproxy/front"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"go.uber.org/zap"
)

// Roles of serve.
const (
	roleAll   = "all"
	roleFront = "front"
	roleNode  = "node"
)

// serveFront runs a front: the client-facing proxy alone, routing each session to
// the node that serves its branch, with the catalog as the only shared state. It
// needs no root and runs no branch.
func serveFront(g *globalFlags, f *serveFlags) error {
	if !catalog.IsPostgres(f.catalog) {
		return errors.New("--role front needs --catalog postgres://…: fronts and nodes share one catalog")
	}
	member, err := loadMember(f, cluster.RoleFront)
	if err != nil {
		return err
	}
	if err := checkProxyFlags(f, false); err != nil {
		return err
	}
	log, err := newLogger(f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	defer log.Sync()
	stateDir, err := filepath.Abs(g.stateDir)
	if err != nil {
		return err
	}
	tlsCfg, fp, err := loadTLS(f.tlsCert, f.tlsKey, f.tlsAuto, stateDir, f.listen)
	if err != nil {
		return err
	}
	if tlsCfg == nil && (f.tlsMode == proxy.TLSAllow || f.tlsMode == proxy.TLSRequire) {
		return fmt.Errorf("--tls-mode %s needs --tls-cert and --tls-key, or --tls-auto", f.tlsMode)
	}
	if tlsCfg != nil {
		log.Info("TLS", zap.String("sha256_fingerprint", fp), zap.String("mode", cmpOr(f.tlsMode, proxy.TLSAllow)))
	}
	cat, err := catalog.Open(f.catalog)
	if err != nil {
		return err
	}
	defer cat.Close()
	// Server sessions are kept by the nodes, which own them: the front passes each
	// session's end on to its node.
	var dial front.Dialer
	if member != nil {
		dial = front.TLSDialer(member)
	}
	routes := front.New(cat, dial)
	px, err := proxy.New(proxy.Config{
		DefaultBranch: f.defaultBranch,
		// Longer than a node's own bound, so that the node's 57P03 reaches the
		// client rather than the front's timeout.
		AcquireTimeout:  f.startupTimeout + 5*time.Second,
		Auth:            f.auth,
		TLS:             tlsCfg,
		TLSMode:         f.tlsMode,
		MaxClientConns:  f.maxClientConns,
		WriteTimeout:    f.writeTimeout,
		FailedLogins:    f.failedLogins,
		Relay:           f.relay,
		KernelLoadFails: f.relayFailLoad,
		CancelElsewhere: routes.CancelElsewhere,
		AuthSecret:      authSecret(cat, log),
	}, routes, log.Named("proxy"))
	if err != nil {
		return err
	}
	metricsHandler := newMetricsHandler(nil, &px.Stats, px.RelayStats())
	if f.metricsListen != "" {
		stopMetrics, err := serveMetrics(f.metricsListen, metricsHandler)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	fw := &nodeForwarder{cat: cat, routes: routes, member: member, stateDir: stateDir, listen: f.listen, log: log.Named("admin")}
	defer fw.close()
	api, err := admin.NewFront(cat, metricsHandler, f.adminToken, fw.forward, log.Named("admin"))
	if err != nil {
		return err
	}
	sock, unlock, err := frontAdminSocket(stateDir, log)
	if err != nil {
		return err
	}
	defer unlock()
	stopAdmin, err := serveAdmin(api, sock, f)
	if err != nil {
		return err
	}
	defer stopAdmin()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	watched := make(chan struct{})
	go func() { routes.Watch(ctx); close(watched) }()
	lns, err := listenClients(ctx, f)
	if err != nil {
		return err
	}
	fw.setClients(lns)
	fields := []zap.Field{zap.String("listen", lns[0].Addr().String()), zap.String("catalog", cat.Backend()),
		zap.String("to_nodes", map[bool]string{true: "mutual TLS as " + memberName(member), false: "plain TCP"}[member != nil]),
		unixSocketField(lns), zap.Int("max_client_conns", px.MaxClientConns())}
	log.Info("pgbranchproxy front ready", append(fields, servingFields(f)...)...)
	err = serveUntilDone(ctx, stop, px, lns, nil, log)
	stopSessions(px, f.grace, log)
	stop() // ends the route watch
	<-watched
	log.Info("stopped")
	return err
}

// loadMember loads this member's cluster credentials (--cluster-dir,
// --cluster-name) for role; nil without --cluster-dir.
func loadMember(f *serveFlags, role cluster.Role) (*cluster.Member, error) {
	if f.clusterDir == "" {
		if f.clusterName != "" {
			return nil, errors.New("--cluster-name needs --cluster-dir")
		}
		return nil, nil
	}
	if f.role == roleAll {
		return nil, errors.New("--cluster-dir is for --role front or node")
	}
	if f.clusterName == "" {
		return nil, errors.New("--cluster-dir needs --cluster-name, this member's name")
	}
	if role == cluster.RoleNode && (f.tlsCert != "" || f.tlsAuto) {
		return nil, errors.New("a node's TLS is the cluster's: drop --tls-cert/--tls-auto")
	}
	m, err := cluster.Load(cluster.MemberFiles(f.clusterDir, role, f.clusterName), nil)
	if err != nil {
		return nil, fmt.Errorf("--cluster-dir: %w", err)
	}
	return m, nil
}

func memberName(m *cluster.Member) string {
	if m == nil {
		return ""
	}
	return m.Name
}

// frontAdminSocket returns where a front's admin socket goes, with the state
// directory's lock taken (a front on a node's state directory, or a second
// front on its own, is refused as a second node would be), or "" when the
// directory cannot be made: the socket is a convenience on a front, whose
// sessions do not need it, and the front serves on without it.
func frontAdminSocket(stateDir string, log *zap.Logger) (sock string, unlock func(), err error) {
	f, err := lockFrontDir(stateDir)
	switch {
	case errors.Is(err, branches.ErrStateDirInUse):
		return "", nil, err
	case err != nil:
		log.Warn("no admin socket: give the front a writable --state-dir of its own for admin commands through it", zap.Error(err))
		return "", func() {}, nil
	}
	return filepath.Join(stateDir, "admin.sock"), func() { f.Close() }, nil
}

// lockFrontDir makes a front's state directory and takes its lock.
func lockFrontDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return branches.LockStateDir(dir)
}

// drainer is the proxy server's stop, as a front's shutdown uses it.
type drainer interface {
	Drain(ctx context.Context) bool
	Shutdown(ctx context.Context)
}

// stopSessions lets a front's sessions run for grace, then closes the rest at
// once (Shutdown given a context that is done), as --grace says; it waited a
// second grace period before.
func stopSessions(px drainer, grace time.Duration, log *zap.Logger) {
	log.Info("shutting down", zap.Duration("grace", grace))
	graceCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if !px.Drain(graceCtx) {
		log.Info("grace period over: closing the sessions left")
	}
	done, end := context.WithCancel(context.Background())
	end()
	px.Shutdown(done)
}

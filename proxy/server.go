package proxy

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"go.uber.org/zap"
)

// Lease is a session's hold on a running branch.
type Lease interface {
	// Dial connects to the branch's server.
	Dial(ctx context.Context) (net.Conn, error)
	// TakeIdle returns an idle server session parked on the branch with the given
	// startup key (one that Park parked, or that the engine opened ahead with
	// OpenIdle), or nil.
	TakeIdle(key string) io.Closer
	// Release ends the session; it is called exactly once.
	Release()
	// Park, called at most once and after Release, parks the session's reset, idle
	// server session on the branch for the next client with the same key; the
	// branch closes it instead when it will not keep it.
	Park(key string, c io.Closer)
}

// An IdleDropper is a Lease that can give up a server session parked on its
// branch under any startup key. Parked sessions hold connection slots of the
// branch's server: when that server refuses a new session for want of slots
// (53300), the proxy closes parked sessions, one at a time, and tries again.
type IdleDropper interface {
	// DropIdle removes the longest-parked server session of the branch whose
	// startup key match accepts (nil: any) and returns it for the caller to
	// close, or nil when none is parked.
	DropIdle(match func(key string) bool) io.Closer
}

// A RouteForwarder is a Lease whose server is another pgbranchproxy that routes
// the session itself (a node behind a front): it is sent the route's startup
// parameters with database@branch, and the pgbranch.* parameters RouteParams
// gives (the route's options, with the source the front resolved).
type RouteForwarder interface {
	RouteParams() map[string]string
}

// A Rerouter is a Lease that can find its branch elsewhere when the server it
// leads to refused the session: a front's lease for a new name, placed on a node
// that lost the name to another node (two fronts that saw different live nodes
// placed it on two). Reroute returns the lease to use instead, or nil when
// there is nowhere else to go; the proxy asks at most once per session.
type Rerouter interface {
	Reroute(ctx context.Context) (Lease, error)
}

// A Confirmer is a Lease that checks, once its server has started the session,
// that the session may go on: a front's lease reads its branch's route again
// when the start-up took long, since its node may have been declared dead
// meanwhile. An error refuses the session.
type Confirmer interface {
	Confirm(ctx context.Context, took time.Duration) error
}

// A Noticer is a Lease with something to tell its client: each text goes to the
// client as a NOTICE once the session has started.
type Noticer interface {
	Notices() []string
}

// Branches finds or creates the branch a route names and leases it for one session,
// and tells which roles a route authenticates against.
type Branches interface {
	Acquire(ctx context.Context, r router.Route) (Lease, error)
	// Roles returns the login roles of the route's branch (or of its base when the
	// branch does not exist yet), without creating or waking anything.
	Roles(ctx context.Context, r router.Route) (roles.Set, error)
}

// TLS modes.
const (
	TLSDisable = "disable" // SSLRequest is answered 'N'
	TLSAllow   = "allow"   // TLS when the client asks for it
	TLSRequire = "require" // sessions without TLS are refused (cancel requests still work)
)

// Config configures a Server. The zero value of each field means its default.
type Config struct {
	// DefaultBranch is where a database name without "@" goes; "" refuses it.
	DefaultBranch string
	// StartupTimeout bounds the time from accept to a complete startup packet (default 10s).
	StartupTimeout time.Duration
	// AcquireTimeout bounds how long a client waits for its branch to be created or
	// woken before it gets 57P03 (default 60s).
	AcquireTimeout time.Duration
	// MaxStartupPacket is the largest startup packet accepted (default 10000 bytes).
	MaxStartupPacket int
	// CancelTimeout bounds forwarding one cancel request (default 5s).
	CancelTimeout time.Duration
	// CancelElsewhere, if set, is given the cancel requests whose key no session
	// of this proxy holds (a front passes them to the nodes: the key may be one a
	// node issued to a client of another front).
	CancelElsewhere func(pid uint32, secret []byte, timeout time.Duration)
	// AuthSecret is what the stand-in SCRAM salt of a role that does not exist is
	// derived from, with the role's name: servers that share it (a restart, the
	// fronts of one catalog) answer such a role with the same salt, as a real
	// role's stays the same. Empty: a random one of this process.
	AuthSecret []byte
	// Auth is how clients authenticate at the proxy: AuthSCRAM, AuthMD5 or AuthTrust.
	// The zero value is AuthTrust; the command's default is AuthSCRAM.
	Auth string
	// TLS, when set, is offered to clients; TLSMode says whether it is required.
	TLS     *tls.Config
	TLSMode string // TLSAllow (default with TLS) or TLSRequire; TLSDisable without TLS
	// MaxClientConns refuses connections beyond this many with 53300; 0: a quarter
	// of the process's open-file limit (clientConnsFor); negative: no limit.
	MaxClientConns int
	// WriteTimeout cuts off a client that does not read what its session sends for
	// this long (default 60s).
	WriteTimeout time.Duration
	// FailedLogins is how many failed logins an address may make per minute before it
	// is refused (default 20; negative: no limit).
	FailedLogins int
	// Reuse keeps server sessions that clients leave idle, resets them and hands them
	// to the next client with the same startup parameters instead of starting a new
	// backend (PgBouncer's session pooling).
	Reuse bool
	// ServerLifetime retires a server session this long after its backend started:
	// it is closed, not reset and parked, when its client leaves (0: no limit). A
	// backend's caches only grow, and ALTER ROLE/DATABASE ... SET reach a client
	// only through a new backend.
	ServerLifetime time.Duration
	// GoroutineRelay relays every session with two goroutines instead of handing
	// plaintext sessions to the epoll pumps (for comparison and debugging); the
	// same as Relay RelayGoroutine.
	GoroutineRelay bool
	// Relay is how plaintext sessions are relayed after login: RelayEpoll (the
	// default), RelayAuto, RelayKernel or RelayGoroutine.
	Relay string
	// KernelBacklog caps the bytes a kernel-relayed client may have in flight
	// toward its server beyond what the server took; past it the proxy carries
	// the client's bytes for the rest of the session (default 4 MiB). Toward the
	// client the server's socket buffer bounds them.
	KernelBacklog int
	// KernelLoadFails makes the kernel relay's programs fail to load, as on a
	// kernel without them (for tests of the fallback).
	KernelLoadFails bool
	// KeepConns lets a front carry one session after another on its connection
	// to this server (a node), when it asks with OptKeepConn; needs Reuse.
	KeepConns bool
}

// Stats are the proxy's connection counters.
type Stats struct {
	// Refused counts connections refused with an error, whatever its SQLSTATE
	// (RefusedBy counts them by it).
	Accepted, Active, Refused, Cancels atomic.Int64
	// ServersOpened counts server sessions started for clients; ServersReused,
	// sessions handed out again after a reset (or opened ahead by the engine).
	ServersOpened, ServersReused atomic.Int64
	// ConnsKept counts sessions whose connection to their node was kept for
	// another session (a front's).
	ConnsKept atomic.Int64

	refused refusedCounts
}

// Server accepts Postgres clients and relays them to branches.
// The zero value is not usable; call New. Safe for concurrent use.
type Server struct {
	cfg      Config
	branches Branches
	log      *zap.Logger
	cancels  *cancels
	failures *failures
	// fakeSecret makes the stand-in SCRAM salt of unknown roles stable per name.
	fakeSecret []byte
	Stats      Stats

	pumps      []*pump
	nextPump   atomic.Uint32
	kernel     *kernelRelay // nil: no kernel relay
	relayStats *RelayStats

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	// room, when set, is closed by the next untrack: accept loops waiting for
	// the connections to drop below the cap (waitRoom) wait on it.
	room chan struct{}
	// keptWaiting are kept connections between sessions (waitKept), which a
	// drain closes.
	keptWaiting map[net.Conn]struct{}
	closing     bool // set by Shutdown before it waits; track refuses from then on
	wg          sync.WaitGroup
	// stopRelays, closed when Shutdown's wait is over, ends the sessions the
	// goroutine relay carries (relay.go); relaying counts them.
	stopRelays   chan struct{}
	relaying     sync.WaitGroup
	shutdownOnce sync.Once
}

// New returns a Server.
func New(cfg Config, b Branches, log *zap.Logger) (*Server, error) {
	if b == nil {
		return nil, errors.New("proxy: Branches is required")
	}
	if cfg.DefaultBranch != "" && !router.ValidBranchName(cfg.DefaultBranch) {
		return nil, errors.New("proxy: invalid default branch name")
	}
	if cfg.StartupTimeout <= 0 {
		cfg.StartupTimeout = 10 * time.Second
	}
	if cfg.AcquireTimeout <= 0 {
		cfg.AcquireTimeout = 60 * time.Second
	}
	if cfg.MaxStartupPacket <= 0 {
		cfg.MaxStartupPacket = DefaultMaxStartupPacket
	}
	if cfg.CancelTimeout <= 0 {
		cfg.CancelTimeout = 5 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 60 * time.Second
	}
	if cfg.MaxClientConns == 0 {
		cfg.MaxClientConns = clientConnsFor(openFileLimit())
	}
	if cfg.FailedLogins == 0 {
		cfg.FailedLogins = 20
	}
	switch cfg.Auth {
	case "":
		cfg.Auth = AuthTrust
	case AuthTrust, AuthSCRAM, AuthMD5:
	default:
		return nil, fmt.Errorf("proxy: auth %q: want scram-sha-256, md5 or trust", cfg.Auth)
	}
	switch {
	case cfg.TLS == nil && (cfg.TLSMode == "" || cfg.TLSMode == TLSDisable):
		cfg.TLSMode = TLSDisable
	case cfg.TLS == nil:
		return nil, fmt.Errorf("proxy: tls mode %q needs a certificate", cfg.TLSMode)
	case cfg.TLSMode == "":
		cfg.TLSMode = TLSAllow
	case cfg.TLSMode == TLSDisable:
		cfg.TLS = nil
	case cfg.TLSMode != TLSAllow && cfg.TLSMode != TLSRequire:
		return nil, fmt.Errorf("proxy: tls mode %q: want disable, allow or require", cfg.TLSMode)
	}
	if cfg.Relay == "" {
		cfg.Relay = RelayEpoll
		if cfg.GoroutineRelay {
			cfg.Relay = RelayGoroutine
		}
	}
	switch cfg.Relay {
	case RelayAuto, RelayKernel, RelayEpoll, RelayGoroutine:
	default:
		return nil, fmt.Errorf("proxy: relay %q: want auto, kernel, epoll or goroutine", cfg.Relay)
	}
	if cfg.KernelBacklog <= 0 {
		cfg.KernelBacklog = 4 << 20
	}
	if cfg.TLS != nil {
		cfg.TLS = cfg.TLS.Clone()
		cfg.TLS.NextProtos = []string{alpnPostgres}
		if cfg.TLS.MinVersion == 0 {
			cfg.TLS.MinVersion = tls.VersionTLS12
		}
	}
	secret := cfg.AuthSecret
	if len(secret) == 0 {
		secret = make([]byte, 32)
		rand.Read(secret)
	}
	s := &Server{cfg: cfg, branches: b, log: log, cancels: newCancels(), failures: newFailures(cfg.FailedLogins, time.Minute),
		fakeSecret: secret, conns: map[net.Conn]struct{}{}, keptWaiting: map[net.Conn]struct{}{}, relayStats: newRelayStats(cfg.Relay),
		stopRelays: make(chan struct{})}
	if err := s.startKernelRelay(); err != nil {
		return nil, err
	}
	if cfg.Relay != RelayGoroutine {
		for range max(1, runtime.GOMAXPROCS(0)/2) {
			p, err := newPump(runtime.GOMAXPROCS(0) > 1)
			if err != nil {
				s.closePumps()
				return nil, err
			}
			s.pumps = append(s.pumps, p)
		}
	}
	return s, nil
}

// Serve accepts connections on ln until ctx ends, handling each in its own
// goroutine. It closes ln when ctx ends and then returns nil; sessions go on until
// Shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var delay time.Duration
	for {
		if !s.waitRoom(ctx) {
			return nil
		}
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("accept", zap.Error(err), zap.Duration("retry_in", delay))
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		s.Stats.Accepted.Add(1)
		if !s.track(conn) {
			conn.Close()
			continue
		}
		go s.handle(conn)
	}
}

// track registers a connection for Shutdown; false once Shutdown has begun.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.Stats.Active.Add(1)
	return true
}

// retrack makes c, a client's connection made anew, the one Shutdown closes in
// place of old.
func (s *Server) retrack(old, c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		c.Close() // Shutdown has closed the connections
		return
	}
	delete(s.conns, old)
	s.conns[c] = struct{}{}
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	if s.conns != nil {
		delete(s.conns, c)
	}
	s.Stats.Active.Add(-1)
	if s.room != nil {
		close(s.room)
		s.room = nil
	}
	s.mu.Unlock()
	s.wg.Done()
}

// Shutdown waits for sessions to end until ctx ends, then closes the rest, and waits
// until every connection handler has returned and every session has ended (pumped
// sessions end after their handlers have returned). Serve's context should be done
// first.
//
// A second Shutdown waits for the first and does nothing more.
func (s *Server) Shutdown(ctx context.Context) {
	s.shutdownOnce.Do(func() { s.shutdown(ctx) })
}

func (s *Server) shutdown(ctx context.Context) {
	done := s.drain()
	select {
	case <-done:
	case <-ctx.Done():
	}
	s.endRelays()
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	s.closePumps()
	<-done
}

// endRelays ends the sessions on the goroutine relay, each told why at a message
// boundary (as the pumps tell theirs, pump_stop.go), and waits for them a moment:
// a client that does not take the notice is closed all the same.
func (s *Server) endRelays() {
	s.mu.Lock()
	close(s.stopRelays)
	s.mu.Unlock()
	ended := make(chan struct{})
	go func() { s.relaying.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(2 * stopNoticeWait):
	}
}

// relayStarts counts a session the goroutine relay starts to carry, unless
// endRelays has begun (the session then ends at once), and returns what to call
// when it ends.
func (s *Server) relayStarts() (ends func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stopRelays:
		return func() {}
	default:
		s.relaying.Add(1)
		return s.relaying.Done
	}
}

// Drain stops taking connections (Serve's context should be done first) and waits
// until every session has ended or ctx ends. It reports whether all ended.
func (s *Server) Drain(ctx context.Context) bool {
	select {
	case <-s.drain():
		return true
	case <-ctx.Done():
		return false
	}
}

// drain makes track refuse new connections and returns a channel closed when every
// tracked connection's handler has returned.
func (s *Server) drain() <-chan struct{} {
	s.mu.Lock()
	s.closing = true
	s.closeKeptWaiting()
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	return done
}

// closePumps ends the sessions the relays carry, and their loops.
func (s *Server) closePumps() {
	if s.kernel != nil {
		s.kernel.close()
	}
	for _, p := range s.pumps {
		p.close()
	}
}

// runLater ends what the pumps have ended and parks what they have reset (see
// afterLoop).
func (s *Server) runLater() {
	for _, p := range s.pumps {
		p.runLater()
	}
}

// pump picks the pump for the next session.
func (s *Server) pump() *pump {
	return s.pumps[int(s.nextPump.Add(1))%len(s.pumps)]
}

// MaxClientConns is the cap on client connections at once; negative: none.
func (s *Server) MaxClientConns() int { return s.cfg.MaxClientConns }

// RelayStats tells which relay sessions use and why sessions fell back from the
// kernel relay.
func (s *Server) RelayStats() *RelayStats { return s.relayStats }

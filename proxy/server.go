package proxy

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/router"
	"go.uber.org/zap"
)

// Lease is a session's hold on a running branch.
type Lease interface {
	// Dial connects to the branch's server.
	Dial(ctx context.Context) (net.Conn, error)
	// Release ends the session; called exactly once.
	Release()
}

// Branches finds or creates the branch a route names and leases it for one session.
type Branches interface {
	Acquire(ctx context.Context, r router.Route) (Lease, error)
}

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
}

// Stats are the proxy's connection counters.
type Stats struct {
	Accepted, Active, Refused, Cancels atomic.Int64
}

// Server accepts Postgres clients and relays them to branches.
// The zero value is not usable; call New. Safe for concurrent use.
type Server struct {
	cfg      Config
	branches Branches
	log      *zap.Logger
	cancels  *cancels
	Stats    Stats

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
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
	return &Server{cfg: cfg, branches: b, log: log, cancels: newCancels(), conns: map[net.Conn]struct{}{}}, nil
}

// Serve accepts connections on ln until ctx ends, handling each in its own
// goroutine. It closes ln when ctx ends and then returns nil; sessions go on until
// Shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var delay time.Duration
	for {
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
	if s.conns == nil {
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.Stats.Active.Add(1)
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	if s.conns != nil {
		delete(s.conns, c)
	}
	s.mu.Unlock()
	s.Stats.Active.Add(-1)
	s.wg.Done()
}

// Shutdown waits for sessions to end until ctx ends, then closes the rest, and waits
// for every connection handler to return. Serve's context should be done first.
func (s *Server) Shutdown(ctx context.Context) {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	<-done
}

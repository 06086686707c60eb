package proxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Relay modes (Config.Relay).
const (
	RelayAuto      = "auto"      // kernel where it loads and the session qualifies, else epoll
	RelayKernel    = "kernel"    // like auto, but the proxy does not start without the kernel relay
	RelayEpoll     = "epoll"     // the epoll pump for plaintext sessions
	RelayGoroutine = "goroutine" // two goroutines a session
)

// RelayEnd says how a relayed session ended.
type RelayEnd int

// How sessions end.
const (
	// EndClosed: either side closed (the epoll pump and the goroutine relay do not
	// say which); the backend is closed.
	EndClosed RelayEnd = iota
	// EndTerminate: the client sent Terminate, which was not forwarded.
	EndTerminate
	// EndClientClosed: the client's connection ended without Terminate.
	EndClientClosed
	// EndServerClosed: the branch server closed the connection.
	EndServerClosed
	// EndStalled: the client did not read for the write timeout and was cut off.
	EndStalled
	// EndShutdown: the proxy shut down under the session.
	EndShutdown
)

var endNames = [...]string{"closed", "terminate", "client_closed", "server_closed", "stalled", "shutdown"}

func (e RelayEnd) String() string {
	if int(e) < len(endNames) {
		return endNames[e]
	}
	return "unknown"
}

// RelayResult is how a session's relay ended.
type RelayResult struct {
	End RelayEnd
	// Backend is the branch server connection when the relay leaves it open and
	// usable (the kernel relay, on EndTerminate, EndClientClosed and EndStalled of
	// a spliced session): the caller closes it or keeps it. Nil when the relay
	// closed it.
	Backend net.Conn
	// Relay names the relay that carried the session last: kernel, epoll or
	// goroutine.
	Relay string
	// Idle: at the end the server session was found idle outside a transaction,
	// with nothing in flight, and can be reset and reused.
	Idle bool
}

// RelayStats count sessions by relay and why sessions fell back from the kernel
// relay. Safe for concurrent use.
type RelayStats struct {
	// Mode is the configured relay mode; KernelLoaded whether the BPF programs
	// loaded, and LoadError why not.
	Mode         string
	KernelLoaded bool
	LoadError    string

	sockets   func() (tcp, unix int) // nil without the kernel relay
	pauses    atomic.Int64
	mu        sync.Mutex
	active    map[string]*atomic.Int64
	total     map[string]*atomic.Int64
	fallbacks map[string]*atomic.Int64
}

func newRelayStats(mode string) *RelayStats {
	st := &RelayStats{Mode: mode, active: map[string]*atomic.Int64{}, total: map[string]*atomic.Int64{}, fallbacks: map[string]*atomic.Int64{}}
	for _, r := range []string{RelayKernel, RelayEpoll, RelayGoroutine} {
		st.active[r], st.total[r] = new(atomic.Int64), new(atomic.Int64)
	}
	return st
}

func (st *RelayStats) counter(m map[string]*atomic.Int64, k string) *atomic.Int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	c := m[k]
	if c == nil {
		c = new(atomic.Int64)
		m[k] = c
	}
	return c
}

func (st *RelayStats) start(relay string) {
	st.counter(st.active, relay).Add(1)
	st.counter(st.total, relay).Add(1)
}

func (st *RelayStats) stop(relay string) { st.counter(st.active, relay).Add(-1) }

func (st *RelayStats) fellBack(reason string) { st.counter(st.fallbacks, reason).Add(1) }

func snapshot(mu *sync.Mutex, m map[string]*atomic.Int64) map[string]int64 {
	mu.Lock()
	defer mu.Unlock()
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v.Load()
	}
	return out
}

// Active returns the sessions each relay carries now.
func (st *RelayStats) Active() map[string]int64 { return snapshot(&st.mu, st.active) }

// Total returns the sessions each relay has carried.
func (st *RelayStats) Total() map[string]int64 { return snapshot(&st.mu, st.total) }

func (st *RelayStats) paused() { st.pauses.Add(1) }

// Pauses counts the times a kernel-relayed direction passed its backlog cap and
// waited for its receiver.
func (st *RelayStats) Pauses() int64 { return st.pauses.Load() }

// KernelSockets counts the sockets in the kernel relay's maps now (two a spliced
// session).
func (st *RelayStats) KernelSockets() int {
	if st.sockets == nil {
		return 0
	}
	tcp, unix := st.sockets()
	return tcp + unix
}

// Fallbacks returns how many sessions fell back from the kernel relay, by reason.
func (st *RelayStats) Fallbacks() map[string]int64 { return snapshot(&st.mu, st.fallbacks) }

// Fallback reasons.
const (
	fbTLS       = "tls"
	fbBuffered  = "client_bytes_buffered"
	fbNotLoaded = "programs_not_loaded"
	fbNotUnix   = "backend_not_unix"
	fbNotTCP    = "client_not_tcp"
	fbSplice    = "splice_failed"
)

// relayInKernel carries a logged-in plaintext session on the kernel relay when it
// is loaded and the session qualifies (handled). The server session is kept for
// reuse only when the client terminated and the server was found idle. Otherwise
// the session goes to the pump or the goroutine relay, and done, called when it
// ends, counts it there.
func (s *Server) relayInKernel(conn net.Conn, sc *serverConn, leave func(), log *zap.Logger) (keep, handled bool, done func()) {
	tc := plainTCP(conn)
	other := RelayGoroutine
	if plainConn(conn) != nil && len(s.pumps) > 0 {
		other = RelayEpoll
	}
	reason := ""
	switch {
	case s.relayStats.Mode != RelayAuto && s.relayStats.Mode != RelayKernel:
	case tc == nil && plainConn(conn) != nil:
		reason = fbNotTCP // a unix socket client: the programs splice TCP sockets
	case tc == nil:
		reason = fbTLS
		if _, ok := conn.(*peekedConn); ok {
			reason = fbBuffered
		}
	case s.kernel == nil:
		reason = fbNotLoaded
	default:
		uc, ok := sc.Conn.(*net.UnixConn)
		if !ok {
			reason = fbNotUnix
			break
		}
		res, err := s.kernel.relay(tc, uc, s.cfg.WriteTimeout, s.relayStats, leave, log)
		if err != nil {
			log.Warn("kernel relay: splice failed, using the epoll pump", zap.Error(err))
			reason = fbSplice
			break
		}
		if res.End == EndStalled {
			log.Info("client stopped reading: session cut off", zap.Duration("write_timeout", s.cfg.WriteTimeout))
		}
		if res.Backend != nil {
			if s.cfg.Reuse && res.End == EndTerminate && res.Idle {
				sc.Conn = res.Backend
				return true, true, func() {}
			}
			res.Backend.Close()
		}
		return false, true, func() {}
	}
	if reason != "" {
		s.relayStats.fellBack(reason)
	}
	s.relayStats.start(other)
	return false, false, func() { s.relayStats.stop(other) }
}

// waitFor polls cond every step until it holds or the deadline passes.
func waitFor(deadline time.Time, step time.Duration, cond func() bool) bool {
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(step)
	}
}

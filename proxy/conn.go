package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"go.uber.org/zap"
)

// maxBackendStartupMessage bounds messages read from a branch server before the
// relay starts (authentication, parameter status, key data).
const maxBackendStartupMessage = 1 << 20

// Protocol minor versions the proxy speaks with clients: 3.0 and 3.2 (3.2 only
// lengthens cancel keys). Branch servers are always spoken to in 3.0.
const newestMinor = 2

// handle serves one client connection from accept to close: one session, or
// one after another on a connection a front keeps (OptKeepConn). A pumped session
// may go on after handle has returned (see Server.session); the connection stays
// tracked until it ends.
func (s *Server) handle(raw net.Conn) {
	tracked := raw
	handedOff := false // the session's end untracks the connection
	defer func() {
		if !handedOff {
			s.untrack(tracked)
		}
	}()
	conn := raw
	defer func() { conn.Close() }()
	log := s.log.WithLazy(zap.Stringer("remote", remote{raw}))
	if max := s.cfg.MaxClientConns; max > 0 && s.Stats.Active.Load() > int64(max) {
		s.runLater() // sessions that have ended may still be counted
		if s.Stats.Active.Load() > int64(max) {
			s.refuse(conn, log, errTooManyClients)
			return
		}
	}
	conn.SetDeadline(time.Now().Add(s.cfg.StartupTimeout))
	st, err := s.readClientStartup(conn, log)
	for {
		if st.conn != nil {
			conn = st.conn
		}
		if err != nil {
			if errors.Is(err, errProtocol) || errors.Is(err, errNotSupported) || errors.Is(err, errSSLRequired) || errors.Is(err, errNoUser) {
				s.refuse(conn, log, err)
			} else if ce := log.Check(zap.DebugLevel, "client left during startup"); ce != nil {
				ce.Write(zap.Error(err))
			}
			return
		}
		if st.params == nil {
			return // a cancel request, handled
		}
		kept, later := s.session(conn, raw, st, log, func() { s.untrack(tracked) })
		if later {
			handedOff = true
			return
		}
		if kept == nil {
			return
		}
		if kept != conn {
			// The pump handed the socket back as a new connection.
			s.retrack(tracked, kept)
			tracked = kept
		}
		conn = kept
		st, err = s.nextStartup(kept, st, log)
	}
}

// session serves the session whose startup packet st is, on conn. It returns the
// connection to read the next session's startup from when the client (a front)
// keeps it for another session, else nil. It reports later when the session goes
// on without the handler (a pumped session nothing waits for): untrack runs once it
// has ended.
func (s *Server) session(conn, raw net.Conn, st clientStartup, log *zap.Logger, untrack func()) (next net.Conn, later bool) {
	route, err := router.Parse(st.params, s.cfg.DefaultBranch)
	if err != nil {
		s.refuse(conn, log, err)
		return nil, false
	}
	user := st.params["user"]
	log = log.WithLazy(zap.String("database", route.Database), zap.String("branch", route.Branch), zap.String("user", user))
	keepClient := s.takeKeepOption(conn, &st)
	if err := negotiate(conn, st); err != nil {
		return nil, false
	}
	if s.cfg.Auth != AuthTrust {
		if err := s.login(conn, route, user, raw, st.tls); err != nil {
			s.loginFailed(conn, user, err, log)
			return nil, false
		}
	}
	// AuthenticationOk goes out with the branch server's start-up messages.
	conn.SetDeadline(time.Time{})
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.AcquireTimeout)
	defer cancel()
	start := time.Now()
	lease, err := s.branches.Acquire(ctx, route)
	if err != nil {
		s.refuse(conn, log, outOfTime(ctx, err))
		return nil, false
	}
	lease, sc, reused, err := s.sessionOn(ctx, lease, route, log)
	if err == nil {
		err = confirm(ctx, lease, sc, start)
	} else if cerr := confirmFailure(ctx, lease, err, start); cerr != nil {
		err = fmt.Errorf("%w (the branch's server had refused the session: %v)", cerr, err)
	}
	if err != nil {
		lease.Release()
		s.refuseStart(conn, lease, outOfTime(ctx, err), log)
		return nil, false
	}
	secret := s.cancelSecret(lease, sc, st.version, route.Params["database"])
	if ce := log.Check(zap.DebugLevel, "session started"); ce != nil {
		ce.Write(zap.Duration("startup", time.Since(start)), zap.Bool("reused", reused), zap.Uint32("pid", sc.pid))
	}
	_, err = conn.Write(append(sc.greeting(appNameOf(route.Params), sc.pid, secret), notices(lease)...))
	// The client's leaving ends the session on the branch: its cancel key is revoked
	// and the lease released. The kernel relay does that as soon as the client has
	// left, before it checks whether the server session can be reused.
	leave := sync.OnceFunc(func() {
		s.cancels.revoke(sc.pid, secret)
		lease.Release()
	})
	if err != nil {
		leave()
		sc.Close()
		return nil, false
	}
	e := &ending{lease: lease, sc: sc, appName: appNameOf(route.Params), leave: leave, log: log}
	e.park = &parkAfterLeave{park: func(server int) { s.parkReset(lease, sc, server, e.appName, log) }}
	out, later := s.relaySession(conn, raw, e, keepClient, func(out relayOutcome) {
		s.ended(e, out)
		untrack()
	})
	if later {
		return nil, true
	}
	return s.ended(e, out), false
}

// remote names a client's address for the log, when it is written: its TCP
// address, or "local" for a unix socket's.
type remote struct{ c net.Conn }

func (r remote) String() string {
	if localConn(r.c) {
		return "local"
	}
	return r.c.RemoteAddr().String()
}

// outOfTime marks err with errTimedOut when ctx's deadline has passed: the step
// that failed may have noticed it first (a socket deadline set from it), before
// ctx itself was cancelled.
func outOfTime(ctx context.Context, err error) error {
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return fmt.Errorf("%w: %w", errTimedOut, err)
	}
	return err
}

// ending is what the end of a logged-in session needs, whenever it comes.
type ending struct {
	lease   Lease
	sc      *serverConn
	park    *parkAfterLeave
	appName string
	leave   func() // revokes the cancel key and releases the lease, once
	log     *zap.Logger
}

// ended ends a relayed session as out says, and returns the client's connection
// when it is kept for another session (see relayOutcome).
func (s *Server) ended(e *ending, out relayOutcome) net.Conn {
	e.leave()
	// The server session is parked (or being reset) before a node acks its
	// front (ackKept), so that the front's next session finds it.
	switch k, ok := e.lease.(ConnKeeper); {
	case out.end == relayParking:
		e.park.left()
	case ok && e.sc.keep && out.end == relayIdle:
		s.passOn(k, e.sc, e.log)
	default:
		s.endSession(e.lease, e.sc, out.end == relayIdle, e.appName, e.log)
	}
	return s.ackKept(out.client, e.log)
}

// loginFailed tells a client whose login failed why, or logs that it left.
func (s *Server) loginFailed(conn net.Conn, user string, err error, log *zap.Logger) {
	switch {
	case errors.Is(err, errAuthFailed) || errors.Is(err, errTooManyFailures):
		// refuse logs it, once, with the SQLSTATE.
		s.refuse(conn, log, fmt.Errorf("%w for user %q", err, user))
	case errors.Is(err, errProtocol) || errors.Is(err, errRoles) || classify(err).id == "":
		s.refuse(conn, log, err)
	default:
		if ce := log.Check(zap.DebugLevel, "client left during authentication"); ce != nil {
			ce.Write(zap.Error(err))
		}
	}
}

// refuseStart tells the client why its server session did not start: a branch
// server's own refusal (too many clients, no such database) as it was sent, or
// the lease's error when that stands in for it (a branch lost or moved
// meanwhile, see confirmFailure).
func (s *Server) refuseStart(conn net.Conn, lease Lease, err error, log *zap.Logger) {
	var be *backendError
	var ce *ClientError
	if _, fwd := lease.(RouteForwarder); fwd && !errors.As(err, &be) && !errors.As(err, &ce) {
		err = errNodeSilent(err)
	}
	if errors.As(err, &be) {
		s.Stats.countRefused(be.code)
		conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		conn.Write(be.msg)
		log.Info("branch server refused the session", zap.String("sqlstate", be.code), zap.String("message", be.text))
		return
	}
	s.refuse(conn, log, err)
}

// sessionOn opens the route's server session on lease or, when that server
// refused it as unable to serve it now (57P03) and the lease finds the branch
// elsewhere (Rerouter), on the lease found, which it returns.
func (s *Server) sessionOn(ctx context.Context, lease Lease, route router.Route, log *zap.Logger) (Lease, *serverConn, bool, error) {
	sc, reused, err := s.serverSession(ctx, lease, serverParams(lease, route))
	var be *backendError
	rr, ok := lease.(Rerouter)
	if err == nil || !ok || !errors.As(err, &be) || be.code != codeCannotConnectNow {
		return lease, sc, reused, err
	}
	next, rerr := rr.Reroute(ctx)
	if rerr != nil || next == nil {
		if rerr != nil {
			log.Warn("look for the branch elsewhere", zap.Error(rerr))
		}
		return lease, sc, reused, err
	}
	log.Info("the branch's server refused the session: it is elsewhere, and the session goes there", zap.String("refusal", be.text))
	lease.Release()
	sc, reused, err = s.serverSession(ctx, next, serverParams(next, route))
	return next, sc, reused, err
}

// confirmFailure asks a Confirmer lease about a start-up begun at start that its
// server refused with err. A branch declared lost or moved meanwhile is what its
// client is told then, rather than what a node that no longer serves it answered
// (a node frozen and thawed answers before it learns it was declared dead). A
// start-up that got no answer is not asked about: that is already 57P03, and a
// node cut off must not bring every waiting client to the catalog.
func confirmFailure(ctx context.Context, lease Lease, err error, start time.Time) error {
	c, ok := lease.(Confirmer)
	var be *backendError
	if !ok || !errors.As(err, &be) {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), confirmFailureWait)
	defer cancel()
	return c.Confirm(cctx, time.Since(start))
}

// confirmFailureWait bounds the confirmation of a refused start-up, which may
// come after the acquire deadline.
const confirmFailureWait = time.Second

// confirm asks a Confirmer lease whether the session started at start may go
// on; on a refusal the server session is closed.
func confirm(ctx context.Context, lease Lease, sc *serverConn, start time.Time) error {
	c, ok := lease.(Confirmer)
	if !ok {
		return nil
	}
	err := c.Confirm(ctx, time.Since(start))
	if err != nil {
		sc.Close()
	}
	return err
}

// cancelSecret registers the session's cancel key and returns the secret to give
// its client: the proxy's own, random, or for a session on a node behind a front
// (RouteForwarder) the node's, passed through, so that a cancel that reaches
// another front can still be passed to the node that knows it.
func (s *Server) cancelSecret(lease Lease, sc *serverConn, version uint32, issuedFor string) []byte {
	dial := lease.Dial
	if k, ok := lease.(ConnKeeper); ok {
		dial = k.DialNew // a cancel request ends its connection
	}
	t := cancelTarget{dial: dial, pid: sc.pid, secret: sc.secret, issuedFor: issuedFor}
	if _, ok := lease.(RouteForwarder); ok && s.cancels.keep(t) {
		return sc.secret
	}
	secretLen := 4
	if version&0xffff >= newestMinor {
		secretLen = 32 // protocol 3.2 allows up to 256 bytes; Postgres 18 uses 32
	}
	return s.cancels.issue(t, secretLen)
}

// notices returns the NoticeResponses a Noticer lease has for its client, sent
// right after the start-up, as a server sends a notice between queries.
func notices(lease Lease) []byte {
	n, ok := lease.(Noticer)
	if !ok {
		return nil
	}
	var out []byte
	for _, text := range n.Notices() {
		out, _ = (&pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: "00000", Message: text}).Encode(out)
	}
	return out
}

// serverParams returns the startup parameters for the lease's server: the route's
// for a branch server; for a pgbranchproxy that routes the session again
// (RouteForwarder), the same with the route made explicit (database@branch) and
// the pgbranch.* parameters the lease gives.
func serverParams(lease Lease, route router.Route) map[string]string {
	f, ok := lease.(RouteForwarder)
	if !ok {
		return route.Params
	}
	out := make(map[string]string, len(route.Params)+4)
	for k, v := range route.Params {
		out[k] = v
	}
	out["database"] = route.Database + "@" + route.Branch
	for k, v := range f.RouteParams() {
		out[k] = v
	}
	return out
}

// errNodeSilent: a node behind a front did not start the session (it timed out
// or closed without saying why).
func errNodeSilent(err error) error {
	return &ClientError{Code: codeCannotConnectNow, Message: "the branch's node did not answer",
		Hint: "try again in a moment", Err: err}
}

// parkAfterLeave parks a session the pump reset only once its client's lease has
// been released (Lease.Park comes after Release), whichever of the two ends first:
// the reset's end runs the parking if the lease is gone, else leaves it to left.
type parkAfterLeave struct {
	park   func(server int)
	state  atomic.Int32 // 0; 1: the lease was released first; 2: the reset ended first
	server int          // set before state becomes 2
}

// ended is the reset's then.
func (p *parkAfterLeave) ended(server int) {
	p.server = server
	if !p.state.CompareAndSwap(0, 2) {
		p.park(server)
	}
}

// left is called once the lease has been released.
func (p *parkAfterLeave) left() {
	if !p.state.CompareAndSwap(0, 1) {
		p.park(p.server)
	}
}

// relayEnd says what a relayed session left of its server session.
type relayEnd int

const (
	relayClosed  relayEnd = iota // closed, or not reusable: close it
	relayIdle                    // idle, to be reset and parked
	relayParking                 // being reset by the pump, which parks it (and owns it meanwhile)
)

// serverSession gives a client a server session on its branch: a parked one with
// the same startup key when reuse is on and one is alive, else a new one.
func (s *Server) serverSession(ctx context.Context, lease Lease, params map[string]string) (*serverConn, bool, error) {
	s.runLater()
	if s.cfg.Reuse {
		key := startupKey(params)
		for c := lease.TakeIdle(key); c != nil; c = lease.TakeIdle(key) {
			sc, ok := c.(*serverConn)
			if !ok || !sc.alive() {
				c.Close()
				continue
			}
			if app := appNameOf(params); app != sc.appName {
				if err := sc.setAppName(app, s.cfg.CancelTimeout); err != nil {
					sc.Close()
					continue
				}
			}
			s.Stats.ServersReused.Add(1)
			return sc, true, nil
		}
	}
	// Bound the branch server's start-up by the acquire deadline: a silent server must
	// not hold the handler, its lease and Shutdown.
	sc, err := dialServer(ctx, lease.Dial, params)
	switch k, ok := lease.(ConnKeeper); {
	case err == nil || refusal(err) || ctx.Err() != nil:
	case ok && k.Kept():
		// The kept connection failed without an answer from the node (closed or
		// reset): once more, on a new one.
		sc, err = dialServer(ctx, k.DialNew, params)
	case !errors.Is(err, errDialServer):
		// The server took the connection and closed it unanswered: it exited as
		// the lease was taken. Once more: the lease's Dial, finding its socket
		// refused, waits for the exit to be seen and starts the server again.
		sc, err = dialServer(ctx, lease.Dial, params)
	}
	if short, _ := tooManyConnections(err); short {
		sc, err = dialFreeingSlots(ctx, lease, params, err)
	}
	if recovering(err) {
		sc, err = dialRecovered(ctx, lease, params, err)
	}
	if err == nil {
		s.Stats.ServersOpened.Add(1)
	}
	return sc, false, err
}

// tooManyConnections reports whether err is a branch server's refusal of a new
// session for want of connection slots, and which parked sessions hold the slots
// in question: for max_connections (and the slots reserved for superusers) any;
// for a role's connection limit ("too many connections for role …") those of
// that user; for a database's, those on that database. A message in another
// language is taken for max_connections. A postmaster that could not fork a
// backend (a container's pids limit) wants processes, which any parked session's
// backend holds.
func tooManyConnections(err error) (bool, func(key string) bool) {
	var be *backendError
	if !errors.As(err, &be) || be.code != codeTooMany && !be.noFork {
		return false, nil
	}
	if be.noFork {
		return true, nil
	}
	for _, lim := range []struct{ prefix, param string }{
		{`too many connections for role "`, "user"}, {`too many connections for database "`, "database"},
	} {
		if name, ok := strings.CutPrefix(be.text, lim.prefix); ok {
			name = strings.TrimSuffix(name, `"`)
			return true, func(key string) bool { return keyParam(key, lim.param) == name }
		}
	}
	return true, nil
}

// slotWait bounds how long closing a parked session waits for its backend to give
// up its slot.
const slotWait = time.Second

// dialFreeingSlots starts a session for params on a branch server that refused
// one for want of connection slots (err): sessions parked on the branch hold
// slots that no client uses, so it ends those that hold the slots in question
// (tooManyConnections) one at a time, the longest parked first, each until its
// backend has gone, and tries again after each, until the server takes the
// session or none is left. The client gets the server's refusal only when the
// slots are its clients'.
func dialFreeingSlots(ctx context.Context, lease Lease, params map[string]string, err error) (*serverConn, error) {
	d, ok := lease.(IdleDropper)
	if !ok {
		return nil, err
	}
	_, match := tooManyConnections(err)
	for ctx.Err() == nil {
		c := d.DropIdle(match)
		if c == nil {
			return nil, err
		}
		if sc, ok := c.(*serverConn); ok {
			wait := slotWait
			if dl, ok := ctx.Deadline(); ok {
				wait = min(wait, time.Until(dl))
			}
			sc.terminate(wait)
		} else {
			c.Close()
		}
		var sc *serverConn
		sc, err = dialServer(ctx, lease.Dial, params)
		var more bool
		if more, match = tooManyConnections(err); !more {
			return sc, err
		}
	}
	return nil, err
}

// relayOutcome is what a relayed session left: of its server session (end) and,
// when the client asked to keep its connection and ended the session cleanly
// with Terminate, the client's connection, open for the next session.
type relayOutcome struct {
	end    relayEnd
	client net.Conn
}

// relaySession relays the logged-in session e until either side ends it. It
// reports what is left of the server session: nothing to keep, an idle session to
// reset and park, or one the epoll pump is resetting for the next client to set
// application_name to e.appName, which e.park parks once it has been reset and the
// handler has called park.left (the handler must not touch e.sc otherwise). It may
// call e.leave once the client has left. With keepClient, a client that ends the
// session with Terminate, idle, gets its connection back (relayOutcome.client).
//
// A session on the pump that can end without the handler (see pumpSession) is
// not waited for: relaySession returns later, and after is told the outcome when
// the session ends.
func (s *Server) relaySession(conn, raw net.Conn, e *ending, keepClient bool, after func(relayOutcome)) (out relayOutcome, later bool) {
	sc, log := e.sc, e.log
	if s.relayStats.Mode != RelayEpoll {
		// The kernel relay takes the server connection as a Go connection.
		if err := sc.attach(); err != nil {
			log.Warn("take back server connection", zap.Error(err))
			return relayOutcome{end: relayClosed}, false
		}
	}
	keep, handled, done := s.relayInKernel(conn, sc, e.leave, log)
	if handled {
		done()
		return relayOutcome{end: endOf(keep)}, false
	}
	var track *sessionTrack
	if s.cfg.Reuse || sc.keep {
		track = &sessionTrack{}
		if s.cfg.Reuse {
			track.reports.sc = sc // parked for the next client, whose greeting they are
			if d, ok := e.lease.(AllIdleDropper); ok {
				track.dropIdle = d.DropAllIdle
			}
		}
	}
	if pc := plainConn(conn); pc != nil && len(s.pumps) > 0 && sc.socket() {
		then := func(out relayOutcome) {
			done()
			if out.end == relayIdle {
				// endSession resets it: a round trip to the server, which
				// whoever runs the pump's queue must not wait for.
				go after(out)
				return
			}
			after(out)
		}
		if keepClient || sc.keep {
			then = nil // the handler reads the next start-up, or passes the node connection on
		}
		out, later = s.pumpSession(pc, e, track, keepClient, then)
		if !later {
			done()
		}
		return out, later
	}
	defer done()
	if err := sc.attach(); err != nil {
		log.Warn("take back server connection", zap.Error(err))
		return relayOutcome{end: relayClosed}, false
	}
	ends := s.relayStarts()
	stalled, keep := relay(conn, sc.Conn, s.cfg.WriteTimeout, track, s.stopRelays)
	ends()
	if stalled {
		log.Info("client stopped reading: session cut off", zap.Duration("write_timeout", s.cfg.WriteTimeout))
		abort(raw)
	}
	out = relayOutcome{end: endOf(keep)}
	if keepClient && keep && track.terminated {
		out.client = conn
	}
	return out, false
}

// pumpSession relays a plaintext session on an epoll pump (see relaySession). With
// after set, the handler does not wait: the pump tells after how the session ended,
// from outside its loop (see afterLoop), and pumpSession returns later.
func (s *Server) pumpSession(client net.Conn, e *ending, track *sessionTrack, keepClient bool, after func(relayOutcome)) (out relayOutcome, later bool) {
	sc, log := e.sc, e.log
	var reset *pumpReset
	if s.cfg.Reuse && !s.retired(sc) {
		reset = newPumpReset(sc.resetQueries(e.appName), s.cfg.CancelTimeout, e.park.ended)
		reset.reports.sc = sc
	}
	var ended func(pumpResult)
	if after != nil {
		ended = func(r pumpResult) { after(s.pumpOutcome(r, sc, log)) }
	}
	result, err := s.pump().addSession(client, sc, s.cfg.WriteTimeout, track, reset, keepClient, ended)
	if err != nil {
		if errors.Is(err, errPumpStopped) {
			log.Debug("hand session to pump", zap.Error(err))
		} else {
			log.Error("hand session to pump", zap.Error(err))
		}
		return relayOutcome{end: relayClosed}, false
	}
	if ended != nil {
		return relayOutcome{}, true
	}
	return s.pumpOutcome(<-result, sc, log), false
}

// pumpOutcome is what a pumped session left, as the pump reported it in r.
func (s *Server) pumpOutcome(r pumpResult, sc *serverConn, log *zap.Logger) relayOutcome {
	if r.stalled {
		log.Info("client stopped reading: session cut off", zap.Duration("write_timeout", s.cfg.WriteTimeout))
	}
	var out relayOutcome
	if r.client >= 0 {
		c, err := fdConn(r.client)
		if err != nil {
			log.Warn("take back a kept connection", zap.Error(err))
		}
		out.client = c
	}
	switch {
	case r.resetting:
		out.end = relayParking
	case r.server < 0:
		out.end = relayClosed
	default:
		sc.detach(r.server)
		out.end = relayIdle
	}
	return out
}

// refusal reports whether err is the server's answer, rather than a failure to
// reach it.
func refusal(err error) bool {
	var be *backendError
	var ce *ClientError
	return errors.As(err, &be) || errors.As(err, &ce) || errors.Is(err, errBackendAuth) || errors.Is(err, errProtocol)
}

func endOf(keep bool) relayEnd {
	if keep {
		return relayIdle
	}
	return relayClosed
}

// parkReset parks a server session the pump has reset for a client that set
// application_name to appName (server is its socket), or notes that the reset
// failed (server -1; the pump closed the socket). The lease was released when the
// client left.
func (s *Server) parkReset(lease Lease, sc *serverConn, server int, appName string, log *zap.Logger) {
	if server < 0 {
		if ce := log.Check(zap.DebugLevel, "server session not reused"); ce != nil {
			ce.Write(zap.Error(errResetFailed))
		}
		return
	}
	sc.detach(server)
	sc.appName = appName
	sc.parked = time.Now()
	lease.Park(sc.key, sc)
}

// retired reports whether a server session is too old to be kept (ServerLifetime).
func (s *Server) retired(sc *serverConn) bool {
	return s.cfg.ServerLifetime > 0 && time.Since(sc.started) > s.cfg.ServerLifetime
}

// endSession ends the client's session, whose lease has been released: an idle
// server session is reset and parked on the branch for the next client with its
// startup key; any other is closed. The lease goes first because the client has
// left, and whoever waits for the branch's sessions to end (stop, reset, destroy)
// must not wait for the reset.
func (s *Server) endSession(lease Lease, sc *serverConn, keep bool, appName string, log *zap.Logger) {
	if keep && s.retired(sc) {
		keep = false
	}
	if keep {
		if err := sc.reset(appName, s.cfg.CancelTimeout); err != nil {
			if ce := log.Check(zap.DebugLevel, "server session not reused"); ce != nil {
				ce.Write(zap.Error(err))
			}
			keep = false
		}
	}
	if !keep {
		sc.Close()
		return
	}
	sc.parked = time.Now()
	lease.Park(sc.key, sc)
}

// plainTCP returns the client's TCP connection when the session runs over it
// directly (no TLS) and nothing read from it is still buffered.
func plainTCP(c net.Conn) *net.TCPConn {
	tc, _ := plainConn(c).(*net.TCPConn)
	return tc
}

// plainConn returns the client's TCP or unix socket connection when the session
// runs over it directly (no TLS) and nothing read from it is still buffered; else
// nil.
func plainConn(c net.Conn) net.Conn {
	if pc, ok := c.(*peekedConn); ok {
		if pc.r.Buffered() > 0 {
			return nil
		}
		c = pc.Conn
	}
	switch c := c.(type) {
	case *net.TCPConn:
		return c
	case *net.UnixConn:
		return c
	}
	return nil
}

// abort makes the coming Close reset the connection, discarding what the client did
// not read, instead of leaving the kernel to deliver it.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
}

// login authenticates the client at the proxy, before any branch is created or
// woken: failed attempts are counted per address (failures), tlsUsed saying over
// which transport.
func (s *Server) login(conn net.Conn, route router.Route, user string, raw net.Conn, tlsUsed bool) error {
	host := clientHost(raw)
	if s.failures.blocked(host, time.Now()) {
		return errTooManyFailures
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StartupTimeout)
	defer cancel()
	set, err := s.branches.Roles(ctx, route)
	var later *roles.AfterLogin
	if errors.As(err, &later) {
		set, err = later.Set, nil
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errRoles, err)
	}
	err = s.authenticate(conn, user, set)
	if errors.Is(err, errAuthFailed) {
		s.failures.fail(host, user, tlsUsed, time.Now())
	}
	if err != nil {
		return err
	}
	if later != nil {
		return later.Err // what it names is for clients that logged in
	}
	return mayReset(route, set, user)
}

// errNoUser: a startup packet without a user name (28000, as Postgres answers it).
var errNoUser = errors.New("no PostgreSQL user name specified in startup packet")

// errRoles marks a failure to look up the roles to authenticate against: the client
// is told (XX000 with an error id for internal errors), unlike a client that left.
var errRoles = errors.New("look up login roles")

// clientStartup is what the client asked for before authentication.
type clientStartup struct {
	conn    net.Conn // the connection to go on with: TLS once negotiated
	tls     bool
	local   bool // over a unix socket, where no client certificate is asked for: no TLS offered, none required
	version uint32
	params  map[string]string // nil for a cancel request
	pq      []string          // _pq_.* parameters, which the proxy does not support
}

// readClientStartup reads packets until a StartupMessage: it answers SSLRequest (with
// TLS when configured), takes direct TLS (PG17's sslnegotiation=direct), answers
// GSSENCRequest 'N', and forwards a CancelRequest. Over a unix socket TLS is
// answered 'N', as Postgres answers it there.
func (s *Server) readClientStartup(conn net.Conn, log *zap.Logger) (clientStartup, error) {
	st := clientStartup{conn: conn, local: localConn(conn) && !s.clientCerts()}
	if s.cfg.TLS != nil && !st.local {
		c, direct, err := s.maybeDirectTLS(conn)
		st.conn = c
		if err != nil {
			return st, err
		}
		st.tls = direct
	}
	return s.readStartupPackets(st, false, log)
}

// readStartupPackets reads startup-phase packets on st.conn until a
// StartupMessage or a CancelRequest. With negotiated (a kept connection's next
// session) an SSLRequest or GSSENCRequest is a protocol error: the connection
// is as its first session left it.
func (s *Server) readStartupPackets(st clientStartup, negotiated bool, log *zap.Logger) (clientStartup, error) {
	sawSSL, sawGSS := negotiated, negotiated
	for {
		code, body, err := readStartup(st.conn, s.cfg.MaxStartupPacket)
		if err != nil {
			if errors.Is(err, errStartupLength) {
				return st, fmt.Errorf("%w: %v", errProtocol, err)
			}
			return st, err
		}
		switch {
		case code == codeSSL && !sawSSL && !st.tls && len(body) == 4:
			sawSSL = true
			if s.cfg.TLS == nil || st.local {
				if _, err := st.conn.Write([]byte{'N'}); err != nil {
					return st, err
				}
				continue
			}
			if _, err := st.conn.Write([]byte{'S'}); err != nil {
				return st, err
			}
			tc, err := s.handshake(st.conn, false)
			if err != nil {
				return st, err
			}
			st.conn, st.tls = tc, true
		case code == codeGSSENC && !sawGSS && !st.tls && len(body) == 4:
			sawGSS = true
			if _, err := st.conn.Write([]byte{'N'}); err != nil {
				return st, err
			}
		case code == codeCancel:
			s.handleCancel(body, log)
			return st, nil
		case code&majorVersion == protocolV3:
			return s.startupMessage(st, code, body)
		default:
			return st, fmt.Errorf("%w: unsupported frontend protocol %d.%d: server supports 3.0 to 3.%d",
				errProtocol, code>>16, code&0xffff, newestMinor)
		}
	}
}

// startupMessage decodes a StartupMessage of protocol 3.x into st.
func (s *Server) startupMessage(st clientStartup, code uint32, body []byte) (clientStartup, error) {
	// Decode as 3.0 whatever the minor version: the parameters are framed the
	// same way; negotiate answers other minor versions.
	msg := pgproto3.StartupMessage{}
	b := append([]byte(nil), body...)
	binary.BigEndian.PutUint32(b, protocolV3)
	if err := msg.Decode(b); err != nil {
		return st, fmt.Errorf("%w: invalid startup packet", errProtocol)
	}
	if err := checkParams(msg.Parameters); err != nil {
		return st, err
	}
	if s.cfg.TLSMode == TLSRequire && !st.tls && !st.local {
		return st, errSSLRequired
	}
	st.version, st.params, st.pq = code, msg.Parameters, nil
	for k := range st.params {
		if strings.HasPrefix(k, "_pq_.") {
			st.pq = append(st.pq, k)
			delete(st.params, k)
		}
	}
	return st, nil
}

// negotiate sends NegotiateProtocolVersion when the client asked for a minor version
// the proxy does not speak (3.1, or newer than 3.2) or for _pq_ options, as Postgres
// does. Version 3.1 was never used; it is answered with 3.0.
func negotiate(conn net.Conn, st clientStartup) error {
	minor := st.version & 0xffff
	newest := minor
	switch {
	case minor == 1:
		newest = 0
	case minor > newestMinor:
		newest = newestMinor
	}
	if newest == minor && len(st.pq) == 0 {
		return nil
	}
	return writeMsg(conn, &pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: newest, UnrecognizedOptions: st.pq})
}

// checkParams refuses what a branch session cannot be.
func checkParams(p map[string]string) error {
	if v, ok := p["replication"]; ok {
		switch strings.ToLower(v) {
		case "false", "off", "no", "0":
		default:
			return fmt.Errorf("%w: replication connections are not supported through pgbranchproxy", errNotSupported)
		}
	}
	if p["user"] == "" {
		return errNoUser
	}
	return nil
}

func (s *Server) handleCancel(body []byte, log *zap.Logger) {
	var req pgproto3.CancelRequest
	if err := req.Decode(body); err != nil {
		return
	}
	s.Stats.Cancels.Add(1)
	t, ok, err := s.cancels.forward(req.ProcessID, req.SecretKey, s.cfg.CancelTimeout)
	if ok && err != nil {
		log.Warn("forward cancel request", zap.String("session", t.issuedFor), zap.Error(err))
	}
	if !ok && s.cfg.CancelElsewhere != nil {
		s.cfg.CancelElsewhere(req.ProcessID, req.SecretKey, s.cfg.CancelTimeout)
	}
}

// refuse tells the client why it cannot connect, logging internal errors once with
// the id the client sees.
func (s *Server) refuse(conn net.Conn, log *zap.Logger, err error) {
	ce := classify(err)
	s.Stats.countRefused(ce.code)
	if ce.id != "" {
		log.Error("connection failed", zap.String("error_id", ce.id), zap.Error(err))
	} else if c := log.Check(zap.InfoLevel, "connection refused"); c != nil {
		c.Write(zap.String("sqlstate", ce.code), zap.Error(err))
	}
	conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	writeError(conn, ce)
}

// errBackendAuth: the branch server asked for a password, which it never should.
var errBackendAuth = errors.New("branch server asked for authentication")

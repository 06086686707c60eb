package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"golang.org/x/sys/unix"
)

// serverConn is a started session on a branch server: its connection, the backend's
// own cancel key, and what its start-up told the client, so that a later client with
// the same startup key can be handed the same session and see what a fresh start
// would have shown it.
type serverConn struct {
	// Conn is the server connection; nil while the session is detached: its
	// socket, fd, then belongs to no Go connection (the epoll pump handed it back
	// after resetting it) and attach makes one of it when one is needed.
	net.Conn
	fd       int // the detached socket; -1 when Conn is set
	key      string
	pid      uint32
	secret   []byte // the backend's own secret, used only to forward cancels
	status   []byte // the ParameterStatus messages of its start-up, updated by later reports (status.go), application_name left out
	appName  string // application_name now, between clients, as a client asked for it
	startApp string // application_name as of start-up: what DISCARD ALL returns it to
	shownApp string // application_name as the server last reported it (appKnown), what a client is told: Postgres cuts and cleans names
	appKnown bool
	extra    []byte // messages of the first start-up to pass on once (notices)
	parked   time.Time
	started  time.Time // when its backend started: it retires after Config.ServerLifetime
	keep     bool      // the server (a node) took OptKeepConn: the connection can carry another session
}

// startupKey is the part of a client's startup parameters that shapes a server
// session: every parameter but application_name, which is applied with SET.
func startupKey(params map[string]string) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		if k != "application_name" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(params[k])
		b.WriteByte(0)
	}
	return b.String()
}

// keyParam is the value of startup parameter name in a startup key; the
// database defaults to the user, as Postgres takes it.
func keyParam(key, name string) string {
	f := strings.Split(key, "\x00")
	for i := 0; i+1 < len(f); i += 2 {
		if f[i] == name {
			return f[i+1]
		}
	}
	if name == "database" {
		return keyParam(key, "user")
	}
	return ""
}

// appNameOf returns the application_name a session with these startup parameters
// starts with: the parameter, else what options sets (the startup key includes
// options, so every server session of the key starts with it), else "".
func appNameOf(params map[string]string) string {
	if v, ok := params["application_name"]; ok {
		return v
	}
	v, _ := router.OptionSetting(params["options"], "application_name")
	return v
}

// KeyOf returns the startup key of a session with these parameters. Engines use it
// to name the server sessions they open ahead of clients (OpenIdle).
func KeyOf(params map[string]string) string { return startupKey(params) }

// OpenIdle starts a server session ahead of any client, for the startup key that
// KeyOf gives, so that an engine can keep it idle for the first client with that key.
// The returned value is what Lease.TakeIdle later hands back to the proxy.
func OpenIdle(ctx context.Context, dial func(context.Context) (net.Conn, error), key string) (io.Closer, error) {
	params := map[string]string{}
	parts := strings.Split(key, "\x00")
	for i := 0; i+1 < len(parts); i += 2 {
		params[parts[i]] = parts[i+1]
	}
	sc, err := dialServer(ctx, dial, params)
	if err != nil {
		return nil, err
	}
	// A backend's first query fills its catalog caches; run one now so that the
	// first client's first query costs what it costs on a reused session.
	timeout := warmTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	if err := sc.warm(timeout); err != nil {
		sc.Close()
		return nil, fmt.Errorf("warm a server session: %w", err)
	}
	sc.extra = nil
	sc.parked = time.Now()
	return sc, nil
}

// warmQuery is what OpenIdle runs on a new session: it parses, plans and executes,
// which loads the catalog entries every client's first query needs.
const warmQuery = "SELECT 1"

// warmRelations is what OpenIdle runs first: it opens the database's first 100
// relations (oldest first) and their indexes, which fills the relation cache
// that a client's first statements on them would fill. pg_indexes_size opens a
// relation and each of its indexes, holding a relation's lock only while it looks
// at it, and gives NULL for a relation dropped meanwhile. Measured on a claimed
// pool member (docs/benchmarks.md), a test's first INSERT and SELECT took 2.5 and
// 3 ms less. It may fail (warm).
const warmRelations = `SELECT count(pg_indexes_size(oid)) FROM (SELECT oid FROM pg_class
	WHERE relkind IN ('r', 'p', 'm') AND relpersistence <> 't'
	AND relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace, 'pg_toast'::regnamespace)
	ORDER BY oid LIMIT 100) AS r`

// warmTimeout bounds warmQuery.
const warmTimeout = 10 * time.Second

// backendError is an ErrorResponse a branch server sent instead of starting the
// session. The client gets it as it was sent.
type backendError struct {
	msg    []byte // the whole ErrorResponse message
	code   string
	text   string
	noFork bool // the postmaster could not fork a backend (readForkFailure)
}

func (e *backendError) Error() string {
	return fmt.Sprintf("branch server refused the session: %s %s", e.code, e.text)
}

func newBackendError(msg []byte) *backendError {
	e := &backendError{msg: msg}
	var er pgproto3.ErrorResponse
	if er.Decode(msg[5:]) == nil {
		e.code, e.text = er.Code, er.Message
	}
	return e
}

// openServer starts a session on conn with the given startup parameters, in protocol
// 3.0, and reads the server's start-up messages up to ReadyForQuery. On failure conn
// is closed. An ErrorResponse comes back as a *backendError.
func openServer(conn net.Conn, params map[string]string) (*serverConn, error) {
	sc, err := startSession(conn, params)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return sc, nil
}

func startSession(conn net.Conn, params map[string]string) (*serverConn, error) {
	startup, err := (&pgproto3.StartupMessage{ProtocolVersion: protocolV3, Parameters: params}).Encode(nil)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(startup); err != nil {
		return nil, fmt.Errorf("%w: write: %w", errServerClosed, err)
	}
	sc := &serverConn{Conn: conn, fd: -1, key: startupKey(params), started: time.Now(), keep: params[OptKeepConn] != ""}
	br := bufio.NewReaderSize(conn, 4096)
	if be := readForkFailure(br); be != nil {
		return nil, be
	}
	for {
		typ, msg, err := readMessage(br, maxBackendStartupMessage)
		if err != nil {
			return nil, fmt.Errorf("%w: read: %w", errServerClosed, err)
		}
		switch typ {
		case 'R':
			if len(msg) >= 9 && binary.BigEndian.Uint32(msg[5:9]) == 0 {
				continue // AuthenticationOk
			}
			return nil, errBackendAuth
		case 'v':
			// The proxy negotiates with the client itself; a node that does not
			// keep connections says so here.
			var npv pgproto3.NegotiateProtocolVersion
			if npv.Decode(msg[5:]) != nil || slices.Contains(npv.UnrecognizedOptions, OptKeepConn) {
				sc.keep = false
			}
		case 'K':
			var kd pgproto3.BackendKeyData
			if err := kd.Decode(msg[5:]); err != nil {
				return nil, fmt.Errorf("%w: branch server's key data: %v", errProtocol, err)
			}
			sc.pid, sc.secret = kd.ProcessID, kd.SecretKey
		case 'S':
			var ps pgproto3.ParameterStatus
			if err := ps.Decode(msg[5:]); err != nil {
				return nil, fmt.Errorf("%w: branch server's parameter status: %v", errProtocol, err)
			}
			if ps.Name == "application_name" {
				sc.appName, sc.startApp = ps.Value, ps.Value
				sc.shownApp, sc.appKnown = ps.Value, true
				continue
			}
			sc.status = append(sc.status, msg...)
		case 'E':
			return nil, newBackendError(msg)
		case 'Z':
			if n := br.Buffered(); n > 0 {
				// A server sends nothing unasked after its first ReadyForQuery;
				// whatever it did must not be lost.
				rest, _ := br.Peek(n)
				sc.extra = append(sc.extra, rest...)
			}
			if sc.pid == 0 {
				return nil, fmt.Errorf("%w: branch server sent no key data", errProtocol)
			}
			return sc, nil
		default:
			sc.extra = append(sc.extra, msg...) // NoticeResponse
		}
	}
}

// greeting is what the client gets once the session is ready: AuthenticationOk, the
// server's ParameterStatus messages with the application_name the server took for
// the client's (appName when it reported none), the key the proxy issued, and
// ReadyForQuery.
func (sc *serverConn) greeting(appName string, pid uint32, secret []byte) []byte {
	if sc.appKnown {
		appName = sc.shownApp
	}
	out, _ := (&pgproto3.AuthenticationOk{}).Encode(nil)
	out = append(out, sc.status...)
	out, _ = (&pgproto3.ParameterStatus{Name: "application_name", Value: appName}).Encode(out)
	out = append(out, sc.extra...)
	sc.extra = nil
	out, _ = (&pgproto3.BackendKeyData{ProcessID: pid, SecretKey: secret}).Encode(out)
	out, _ = (&pgproto3.ReadyForQuery{TxStatus: 'I'}).Encode(out)
	return out
}

// errResetFailed: a server session did not come back idle from its reset.
var errResetFailed = errors.New("server session did not reset cleanly")

// exec runs simple queries, sent together, and reads to the ReadyForQuery of each,
// which must say 'I', with no ErrorResponse on the way. Everything else the server
// sends is dropped.
func (sc *serverConn) exec(timeout time.Duration, sqls ...string) error {
	var q []byte
	for _, sql := range sqls {
		q, _ = (&pgproto3.Query{String: sql}).Encode(q)
	}
	tags := make([]string, len(sqls))
	for i, sql := range sqls {
		tags[i] = commandTag(sql)
	}
	return sc.roundTrip(timeout, q, tags, len(sqls), strings.Join(sqls, "; "), false)
}

// commandTag is the CommandComplete tag a reset query answers with.
func commandTag(sql string) string {
	if sql == resetQuery {
		return "DISCARD ALL"
	}
	return "SET" // setAppNameQuery
}

// roundTrip writes msgs, which end in n ReadyForQuery answers (one per Query or
// Sync), and reads to the last of them; each must say 'I', with no ErrorResponse on
// the way unless mayFail. With tags, each ReadyForQuery must follow a
// CommandComplete of its tag, with nothing but notices and parameter reports
// besides (see pumpReset.take). what names the work in an error.
func (sc *serverConn) roundTrip(timeout time.Duration, msgs []byte, tags []string, n int, what string, mayFail bool) error {
	if err := sc.attach(); err != nil {
		return err
	}
	sc.SetDeadline(time.Now().Add(timeout))
	defer sc.SetDeadline(time.Time{})
	if _, err := sc.Write(msgs); err != nil {
		return err
	}
	br := bufio.NewReaderSize(sc.Conn, 512)
	failed, tagged := false, false
	for i := 0; i < n; {
		typ, msg, err := readMessage(br, maxBackendStartupMessage)
		if err != nil {
			return err
		}
		switch {
		case typ == 'E':
			failed = !mayFail
		case typ == 'Z':
			if failed || msg[5] != 'I' || tags != nil && !tagged {
				return fmt.Errorf("%w: %s", errResetFailed, what)
			}
			tagged = false
			i++
		case typ == 'S':
			sc.noteStatus(msg[5:])
		case tags == nil, typ == 'N':
		case typ == 'C':
			tagged = i < len(tags) && string(msg[5:]) == tags[i]+"\x00"
			failed = failed || !tagged
		default:
			failed = true
		}
	}
	if br.Buffered() > 0 {
		return fmt.Errorf("%w: the server sent more than asked", errResetFailed)
	}
	return nil
}

// warm runs warmRelations, then warmQuery once with the simple protocol and once
// with the extended one (unnamed statement and portal, as drivers send a first
// query), so that the code and catalog entries of both are loaded.
func (sc *serverConn) warm(timeout time.Duration) error {
	// Best effort: should it fail (a statement_timeout, an index whose access
	// method cannot load), the session is as good as without it.
	rels, _ := (&pgproto3.Query{String: warmRelations}).Encode(nil)
	if err := sc.roundTrip(timeout, rels, nil, 1, "warm-up of relations", true); err != nil {
		return err
	}
	msgs, _ := (&pgproto3.Query{String: warmQuery}).Encode(nil)
	msgs, _ = (&pgproto3.Parse{Query: warmQuery}).Encode(msgs)
	msgs, _ = (&pgproto3.Describe{ObjectType: 'S'}).Encode(msgs)
	msgs, _ = (&pgproto3.Sync{}).Encode(msgs)
	msgs, _ = (&pgproto3.Bind{}).Encode(msgs)
	msgs, _ = (&pgproto3.Describe{ObjectType: 'P'}).Encode(msgs)
	msgs, _ = (&pgproto3.Execute{}).Encode(msgs)
	msgs, _ = (&pgproto3.Close{ObjectType: 'S'}).Encode(msgs) // a new session has no unnamed statement
	msgs, _ = (&pgproto3.Sync{}).Encode(msgs)
	return sc.roundTrip(timeout, msgs, nil, 3, "warm-up", false)
}

// resetQuery returns a session to the state a fresh start would leave it in.
// DISCARD ALL closes cursors, resets the session's role and settings, drops
// prepared statements (protocol-level ones too), listens, advisory locks, temporary
// tables, cached plans and sequence state.
const resetQuery = "DISCARD ALL"

// reset runs the reset query, which returns application_name to its start-up
// value, and sets it to appName in the same round trip when that differs, so that
// the next client with the same name (a test suite, pgbench -C) needs no SET. The
// session must be idle outside a transaction.
func (sc *serverConn) reset(appName string, timeout time.Duration) error {
	sc.appName = ""
	if err := sc.exec(timeout, sc.resetQueries(appName)...); err != nil {
		return err
	}
	sc.appName = appName
	return nil
}

// resetQueries are the queries of a reset that leaves application_name at appName.
func (sc *serverConn) resetQueries(appName string) []string {
	if appName == sc.startApp {
		return []string{resetQuery}
	}
	return []string{resetQuery, setAppNameQuery(appName)}
}

// detach makes fd, a socket the epoll pump handed back, the session's connection,
// outside Go's netpoller: the next pumped session takes it as it is.
// socket reports whether the session's connection is a bare socket, which the
// pump can take (a TLS connection to a node is not).
func (sc *serverConn) socket() bool {
	if sc.Conn == nil {
		return sc.fd >= 0
	}
	_, ok := sc.Conn.(syscall.Conn)
	return ok
}

func (sc *serverConn) detach(fd int) { sc.Conn, sc.fd = nil, fd }

// attach gives a detached session's socket to a Go connection, for the relays and
// queries that need one. On failure the socket is closed.
func (sc *serverConn) attach() error {
	if sc.Conn != nil {
		return nil
	}
	if sc.fd < 0 {
		return net.ErrClosed
	}
	c, err := fdConn(sc.fd)
	sc.fd = -1
	if err != nil {
		return fmt.Errorf("take back server connection: %w", err)
	}
	sc.Conn = c
	return nil
}

// Close closes the server connection, detached or not.
func (sc *serverConn) Close() error {
	if sc.Conn != nil {
		return sc.Conn.Close()
	}
	if sc.fd < 0 {
		return nil
	}
	fd := sc.fd
	sc.fd = -1
	return unix.Close(fd)
}

// terminate ends the server session and waits, up to timeout, until its backend
// has gone: it sends Terminate and reads to the end of the connection, which the
// backend's exit closes after it has given up its connection slot.
func (sc *serverConn) terminate(timeout time.Duration) {
	if err := sc.attach(); err != nil {
		return
	}
	defer sc.Conn.Close()
	sc.Conn.SetDeadline(time.Now().Add(timeout))
	if _, err := sc.Conn.Write([]byte{'X', 0, 0, 0, 4}); err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, sc.Conn)
}

// setAppName applies a client's application_name to a reused session.
func (sc *serverConn) setAppName(name string, timeout time.Duration) error {
	if err := sc.exec(timeout, setAppNameQuery(name)); err != nil {
		return err
	}
	sc.appName = name
	return nil
}

func setAppNameQuery(name string) string {
	return "SET application_name = " + quoteLiteral(name)
}

// quoteLiteral quotes s as an SQL string literal whatever standard_conforming_strings
// says, as Postgres's quote_literal does.
func quoteLiteral(s string) string {
	q := "'" + strings.ReplaceAll(s, "'", "''") + "'"
	if strings.Contains(s, `\`) {
		q = "E" + strings.ReplaceAll(q, `\`, `\\`)
	}
	return q
}

// alive reports whether a parked session can be handed out: its server has sent
// nothing (a terminated backend sends an ErrorResponse and closes) and its socket
// is open. It never blocks.
func (sc *serverConn) alive() bool {
	if sc.Conn == nil {
		return sc.fd >= 0 && peekNothing(uintptr(sc.fd))
	}
	return Quiet(sc.Conn)
}

// Quiet reports whether c is open with nothing to read, without blocking: an
// idle connection its peer has not closed. A TLS connection is looked at on its
// socket (what its peer sent and c has not read yet counts as something).
func Quiet(c net.Conn) bool {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	live := false
	err = raw.Read(func(fd uintptr) bool {
		live = peekNothing(fd)
		return true
	})
	return err == nil && live
}

// peekNothing reports whether the socket fd is open with nothing to read.
func peekNothing(fd uintptr) bool {
	var one [1]byte
	_, _, err := unix.Recvfrom(int(fd), one[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return err == unix.EAGAIN
}

// dialServer dials the branch server and starts a session for params.
func dialServer(ctx context.Context, dial func(context.Context) (net.Conn, error), params map[string]string) (*serverConn, error) {
	conn, err := dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errDialServer, err)
	}
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	sc, err := openServer(conn, params)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return sc, nil
}

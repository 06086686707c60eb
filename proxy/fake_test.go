package proxy_test

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"maps"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// The key the fake branch server gives every session.
const backendPID = 4242

var backendSecret = []byte{1, 2, 3, 4}

// within bounds every wait for something that should happen; it is an upper bound
// on "eventually", never a timing assertion.
const within = 5 * time.Second

// Scripts for the fake branch server's login.
const (
	scriptOK            = ""                // AuthenticationOk, ParameterStatus, BackendKeyData, ReadyForQuery
	scriptAuthError     = "auth-error"      // ErrorResponse 28P01 instead of AuthenticationOk
	scriptErrorAfterKey = "error-after-key" // AuthenticationOk, BackendKeyData, then ErrorResponse 53300
	scriptSilent        = "silent"          // reads the startup packet and never answers
	scriptPassword      = "password"        // asks for a cleartext password
	scriptNotNow        = "not-now"         // ErrorResponse 57P03 instead of AuthenticationOk
	scriptAppName       = "app-name"        // as scriptOK, and application_name is taken and reported as Postgres does (pgAppName)
	scriptForkFailed    = "fork-failed"     // the postmaster's old-style error when it cannot fork a backend (forkFailure)
)

// forkFailure is what a postmaster writes, in the pre-3.0 format, to a connection
// it could not fork a backend for (report_fork_failure_to_client).
const forkFailure = "could not fork new process for connection: Resource temporarily unavailable"

// queryBig is a query the fake server answers with one row of bigValue bytes.
const (
	queryBig = "big"
	bigValue = 200_000
)

// fakeServer is a scripted Postgres server on 127.0.0.1, standing in for a branch's
// server. It reports each StartupMessage and each CancelRequest it gets.
type fakeServer struct {
	t        *testing.T
	ln       net.Listener
	script   string
	startups chan pgproto3.StartupMessage
	cancels  chan pgproto3.CancelRequest
	queries  chan string  // every query, while there is room
	ended    atomic.Int32 // server sessions that ended (the connection closed)
	// maxSessions, when set, is how many sessions the server serves at once: it
	// refuses more with 53300, as Postgres does past max_connections.
	maxSessions int32
	tooMany     string       // the refusal's message; "" for max_connections'
	forkFails   bool         // refuse past maxSessions as a postmaster that cannot fork (forkFailure)
	recovering  atomic.Int32 // sessions to refuse first as a postmaster recovering from a crash does
	live        atomic.Int32 // sessions started and not ended

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func startFakeServer(t *testing.T, script string) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{
		t:        t,
		ln:       ln,
		script:   script,
		startups: make(chan pgproto3.StartupMessage, 64),
		cancels:  make(chan pgproto3.CancelRequest, 64),
		queries:  make(chan string, 256),
		conns:    map[net.Conn]struct{}{},
	}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		s.closed = true
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *fakeServer) addr() string { return s.ln.Addr().String() }

func (s *fakeServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1) // the accept loop holds the count above zero: no race with Wait
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
				s.ended.Add(1)
			}()
			s.serve(c)
		}()
	}
}

func (s *fakeServer) serve(c net.Conn) {
	be := pgproto3.NewBackend(c, c)
	msg, err := be.ReceiveStartupMessage()
	if err != nil {
		return
	}
	var params map[string]string
	switch m := msg.(type) {
	case *pgproto3.CancelRequest:
		report(s.t, s.cancels, pgproto3.CancelRequest{ProcessID: m.ProcessID, SecretKey: bytes.Clone(m.SecretKey)})
		return // closing the connection acknowledges the cancel
	case *pgproto3.StartupMessage:
		params = maps.Clone(m.Parameters)
		report(s.t, s.startups, pgproto3.StartupMessage{ProtocolVersion: m.ProtocolVersion, Parameters: maps.Clone(m.Parameters)})
	default:
		s.t.Errorf("fake server: unexpected startup message %T", msg)
		return
	}
	if n := s.recovering.Add(-1); n >= 0 {
		msg, detail := "the database system is not yet accepting connections", "Consistent recovery state has not been yet reached."
		if n%2 == 0 {
			msg, detail = "the database system is in recovery mode", "" // first, while the other sessions end
		}
		be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P03", Message: msg, Detail: detail})
		be.Flush()
		return
	}
	if s.live.Add(1) > s.maxSessions && s.maxSessions > 0 {
		s.live.Add(-1)
		if s.forkFails {
			c.Write([]byte("E" + forkFailure + "\n\x00"))
			return
		}
		be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "53300",
			Message: cmp.Or(s.tooMany, "sorry, too many clients already")})
		be.Flush()
		return
	}
	defer s.live.Add(-1)
	switch s.script {
	case scriptSilent:
		io.Copy(io.Discard, c) // until the proxy or the cleanup closes the connection
		return
	case scriptPassword:
		be.Send(&pgproto3.AuthenticationCleartextPassword{})
		be.Flush()
		io.Copy(io.Discard, c)
		return
	case scriptAuthError:
		be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "28P01",
			Message: `password authentication failed for user "u"`})
		be.Flush()
		return
	case scriptForkFailed:
		c.Write([]byte("E" + forkFailure + "\n\x00"))
		return
	case scriptNotNow:
		be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P03",
			Message: "the branch is being created elsewhere"})
		be.Flush()
		return
	case scriptErrorAfterKey:
		be.Send(&pgproto3.AuthenticationOk{})
		be.Send(&pgproto3.BackendKeyData{ProcessID: backendPID, SecretKey: backendSecret})
		be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "53300",
			Message: cmp.Or(s.tooMany, "sorry, too many clients already")})
		be.Flush()
		return
	}
	be.Send(&pgproto3.AuthenticationOk{})
	be.Send(&pgproto3.ParameterStatus{Name: "server_version", Value: "15.0"})
	var app *appNameGUC
	if s.script == scriptAppName {
		app = newAppNameGUC(params["application_name"])
		app.report(be)
	}
	be.Send(&pgproto3.BackendKeyData{ProcessID: backendPID, SecretKey: backendSecret})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if err := be.Flush(); err != nil {
		return
	}
	tx := byte('I')
	for {
		msg, err := be.Receive()
		if err != nil {
			return
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			select {
			case s.queries <- m.String:
			default:
			}
			switch strings.ToLower(m.String) {
			case "begin":
				tx = 'T'
			case "commit", "rollback":
				tx = 'I'
			}
			if m.String == queryBig {
				be.Send(&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{
					{Name: []byte("v"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1}}})
				be.Send(&pgproto3.DataRow{Values: [][]byte{bytes.Repeat([]byte("x"), bigValue)}})
			}
			be.Send(&pgproto3.CommandComplete{CommandTag: []byte(fakeTag(m.String))})
			if app != nil {
				app.exec(m.String)
				app.report(be)
			}
			be.Send(&pgproto3.ReadyForQuery{TxStatus: tx})
			if err := be.Flush(); err != nil {
				return
			}
		case *pgproto3.Terminate:
			return
		default:
			s.t.Errorf("fake server: unexpected message %T", msg)
			return
		}
	}
}

// report sends v on a buffered channel, failing the test rather than blocking.
func report[T any](t *testing.T, ch chan<- T, v T) {
	select {
	case ch <- v:
	default:
		t.Errorf("report channel full, dropped %v", v)
	}
}

// recv waits for one value on ch.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("no %s within %v", what, within)
	}
	var zero T
	return zero
}

// noneYet checks that nothing has been sent on ch.
func noneYet[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Errorf("unexpected %s: %+v", what, v)
	default:
	}
}

// fakeBranches is a proxy.Branches whose leases dial a fake server. Acquire fails
// with err when it is set. Roles returns roles, or fails with rolesErr.
type fakeBranches struct {
	addr     string
	err      error
	routes   chan router.Route // one per Acquire
	roles    roles.Set
	rolesErr error
	lookups  chan router.Route // one per Roles

	cutDials atomic.Int32 // this many dials connect to a server that closes at once

	mu     sync.Mutex
	leases []*fakeLease
	idle   map[string][]io.Closer // parked server sessions by startup key, as the engine keeps them
	parks  atomic.Int32           // Park calls
}

// waitParks waits until Park has been called n times in all.
func (b *fakeBranches) waitParks(t *testing.T, n int32) {
	t.Helper()
	deadline := time.Now().Add(within)
	for b.parks.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d server sessions parked", b.parks.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// parked returns how many server sessions are parked.
func (b *fakeBranches) parked() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, cs := range b.idle {
		n += len(cs)
	}
	return n
}

// parkedWith reports whether a server session is parked under a startup key
// that holds s.
func (b *fakeBranches) parkedWith(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, cs := range b.idle {
		if len(cs) > 0 && strings.Contains(k, s) {
			return true
		}
	}
	return false
}

func newFakeBranches(addr string, err error) *fakeBranches {
	return &fakeBranches{addr: addr, err: err, routes: make(chan router.Route, 64), lookups: make(chan router.Route, 64)}
}

func (b *fakeBranches) Roles(ctx context.Context, r router.Route) (roles.Set, error) {
	select {
	case b.lookups <- r:
	default:
		panic("fakeBranches: lookups channel full")
	}
	return b.roles, b.rolesErr
}

func (b *fakeBranches) Acquire(ctx context.Context, r router.Route) (proxy.Lease, error) {
	select {
	case b.routes <- r:
	default:
		panic("fakeBranches: routes channel full")
	}
	if b.err != nil {
		return nil, b.err
	}
	l := &fakeLease{addr: b.addr, released: make(chan struct{}), b: b}
	b.mu.Lock()
	b.leases = append(b.leases, l)
	b.mu.Unlock()
	return l, nil
}

// lease returns the i-th lease Acquire handed out.
func (b *fakeBranches) lease(t *testing.T, i int) *fakeLease {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if i >= len(b.leases) {
		t.Fatalf("lease %d: only %d acquired", i, len(b.leases))
	}
	return b.leases[i]
}

type fakeLease struct {
	b        *fakeBranches
	addr     string
	releases atomic.Int32
	released chan struct{} // closed on the first Release
}

func (l *fakeLease) Dial(ctx context.Context) (net.Conn, error) {
	if l.b.cutDials.Add(-1) >= 0 {
		c, server := net.Pipe()
		server.Close() // a server that exited as it took the connection
		return c, nil
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", l.addr)
}

func (l *fakeLease) Release() {
	if l.releases.Add(1) == 1 {
		close(l.released)
	}
}

func (l *fakeLease) TakeIdle(key string) io.Closer {
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	cs := l.b.idle[key]
	if len(cs) == 0 {
		return nil
	}
	c := cs[len(cs)-1]
	l.b.idle[key] = cs[:len(cs)-1]
	return c
}

func (l *fakeLease) DropIdle(match func(key string) bool) io.Closer {
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	for k, cs := range l.b.idle {
		if len(cs) > 0 && (match == nil || match(k)) {
			l.b.idle[k] = cs[1:]
			return cs[0]
		}
	}
	return nil
}

func (l *fakeLease) Park(key string, c io.Closer) {
	if l.releases.Load() == 0 {
		panic("Park before Release")
	}
	l.b.mu.Lock()
	if l.b.idle == nil {
		l.b.idle = map[string][]io.Closer{}
	}
	l.b.idle[key] = append(l.b.idle[key], c)
	l.b.mu.Unlock()
	l.b.parks.Add(1)
}

// waitReleased waits for the lease's first Release.
func (l *fakeLease) waitReleased(t *testing.T) {
	t.Helper()
	select {
	case <-l.released:
	case <-time.After(within):
		t.Fatalf("lease not released within %v", within)
	}
}

// fakeTag is the CommandComplete tag Postgres answers q with, for the commands the
// proxy sends itself; SELECT 1 for the rest.
func fakeTag(q string) string {
	switch u := strings.ToUpper(q); {
	case u == "DISCARD ALL":
		return u
	case strings.HasPrefix(u, "SET "):
		return "SET"
	case u == "BEGIN" || u == "COMMIT" || u == "ROLLBACK":
		return u
	}
	return "SELECT 1"
}

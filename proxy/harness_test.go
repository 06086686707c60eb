package proxy_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// testProxy is a proxy.Server serving on 127.0.0.1.
type testProxy struct {
	srv  *proxy.Server
	addr string
	port string
	logs *observer.ObservedLogs
	// shutdown ends Serve, waits for it, then runs Shutdown with the given grace
	// period. Only the first call does anything; t.Cleanup calls it too.
	shutdown func(grace time.Duration)
}

func startProxy(t *testing.T, cfg proxy.Config, b proxy.Branches) *testProxy {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	log := zaptest.NewLogger(t, zaptest.Level(zap.DebugLevel),
		zaptest.WrapOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) })))
	srv, err := proxy.New(cfg, b, log)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	p := &testProxy{srv: srv, addr: ln.Addr().String(), logs: logs}
	_, p.port, _ = net.SplitHostPort(p.addr)
	stop := func(grace time.Duration) {
		cancel()
		// Wait for Serve before Shutdown, so that no connection is tracked while
		// Shutdown waits (Server.Shutdown's WaitGroup must not see an Add from zero
		// during its Wait).
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve = %v, want nil after its context ends", err)
			}
		case <-time.After(within):
			t.Errorf("Serve did not return within %v of its context ending", within)
		}
		graceCtx, cancelGrace := context.WithTimeout(context.Background(), grace)
		defer cancelGrace()
		srv.Shutdown(graceCtx)
	}
	var once sync.Once
	p.shutdown = func(grace time.Duration) { once.Do(func() { stop(grace) }) }
	t.Cleanup(func() { p.shutdown(within) })
	return p
}

// connString is a pgconn connection string for the proxy as user u; extra is appended.
func (p *testProxy) connString(extra string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%s user=u sslmode=disable %s", p.port, extra)
}

func (p *testProxy) connect(t *testing.T, extra string) (*pgconn.PgConn, error) {
	t.Helper()
	return p.connectTo(t, p.connString(extra))
}

// connectAs connects as user with password.
func (p *testProxy) connectAs(t *testing.T, user, password, extra string) (*pgconn.PgConn, error) {
	t.Helper()
	return p.connectTo(t, fmt.Sprintf("host=127.0.0.1 port=%s user='%s' password='%s' sslmode=disable %s", p.port, user, password, extra))
}

func (p *testProxy) connectTo(t *testing.T, connString string) (*pgconn.PgConn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	conn, err := pgconn.Connect(ctx, connString)
	if err == nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), within)
			defer cancel()
			conn.Close(ctx)
		})
	}
	return conn, err
}

func (p *testProxy) mustConnect(t *testing.T, extra string) *pgconn.PgConn {
	t.Helper()
	conn, err := p.connect(t, extra)
	if err != nil {
		t.Fatalf("connect %q: %v", extra, err)
	}
	return conn
}

// dial opens a raw TCP connection to the proxy, closed at cleanup.
func (p *testProxy) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.addr, within)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// query runs one simple query and checks the fake server's answer.
func query(t *testing.T, conn *pgconn.PgConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	res, err := conn.Exec(ctx, "select 1").ReadAll()
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	if len(res) != 1 || res[0].CommandTag.String() != "SELECT 1" {
		t.Fatalf("query results = %+v, want one SELECT 1", res)
	}
}

// pgError finds the server error in a connect error.
func pgError(t *testing.T, err error) *pgconn.PgError {
	t.Helper()
	if err == nil {
		t.Fatal("connected, want an error")
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v (%T), want a *pgconn.PgError in its chain", err, err)
	}
	return pe
}

// Request codes a client sends in place of a protocol version.
const (
	codeCancel = 80877102
	codeSSL    = 80877103
	codeGSSENC = 80877104
	protocol30 = 3 << 16
)

func defaultConfig() proxy.Config {
	return proxy.Config{DefaultBranch: "main", StartupTimeout: 2 * time.Second}
}

// setup starts a fake branch server with the given login script, fake Branches whose
// Acquire fails with acquireErr (if not nil), and a proxy in front of them. The
// options adjust the fake Branches before the proxy starts.
func setup(t *testing.T, cfg proxy.Config, script string, acquireErr error, opts ...func(*fakeBranches)) (*testProxy, *fakeBranches, *fakeServer) {
	t.Helper()
	fs := startFakeServer(t, script)
	fb := newFakeBranches(fs.addr(), acquireErr)
	for _, o := range opts {
		o(fb)
	}
	return startProxy(t, cfg, fb), fb, fs
}

// packet frames a startup-phase packet: length word, code, rest.
func packet(code uint32, rest string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(8+len(rest)))
	b = binary.BigEndian.AppendUint32(b, code)
	return append(b, rest...)
}

// readUntilClosed reads what the proxy sends until it closes the connection; a
// reset counts as a close. It fails the test if the proxy has not closed the
// connection within the bound.
func readUntilClosed(t *testing.T, c net.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection not closed by the proxy: %v (after %q)", err, b)
	}
	return b
}

// parseError parses b as exactly one ErrorResponse message.
func parseError(t *testing.T, b []byte) *pgproto3.ErrorResponse {
	t.Helper()
	if len(b) < 5 || b[0] != 'E' {
		t.Fatalf("got %q, want an ErrorResponse", b)
	}
	if n := binary.BigEndian.Uint32(b[1:5]); int(n)+1 != len(b) {
		t.Fatalf("ErrorResponse length %d, but %d bytes follow its type byte: %q", n, len(b)-1, b)
	}
	var er pgproto3.ErrorResponse
	if err := er.Decode(b[5:]); err != nil {
		t.Fatalf("decode ErrorResponse %q: %v", b, err)
	}
	return &er
}

// loginResult is what the proxy answered a raw StartupMessage with.
type loginResult struct {
	negotiate *pgproto3.NegotiateProtocolVersion
	authOK    bool
	key       *pgproto3.BackendKeyData
	err       *pgproto3.ErrorResponse // nil if the login reached ReadyForQuery
}

// rawLogin sends a StartupMessage of the given protocol version on c and reads the
// answers up to ReadyForQuery or an ErrorResponse.
func rawLogin(t *testing.T, c net.Conn, version uint32, params map[string]string) loginResult {
	t.Helper()
	fe := pgproto3.NewFrontend(c, c)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: version, Parameters: params})
	if err := fe.Flush(); err != nil {
		t.Fatalf("send startup: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(within))
	defer c.SetReadDeadline(time.Time{})
	var res loginResult
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatalf("login: %v", err)
		}
		switch m := msg.(type) {
		case *pgproto3.NegotiateProtocolVersion:
			res.negotiate = &pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: m.NewestMinorProtocol,
				UnrecognizedOptions: slices.Clone(m.UnrecognizedOptions)}
		case *pgproto3.AuthenticationOk:
			res.authOK = true
		case *pgproto3.BackendKeyData:
			res.key = &pgproto3.BackendKeyData{ProcessID: m.ProcessID, SecretKey: bytes.Clone(m.SecretKey)}
		case *pgproto3.ReadyForQuery:
			return res
		case *pgproto3.ErrorResponse:
			er := *m
			res.err = &er
			return res
		}
	}
}

// sendCancel sends a CancelRequest to the proxy on a new connection and waits for
// the proxy to close it, which it does after forwarding the request, if it does.
func (p *testProxy) sendCancel(t *testing.T, pid uint32, secret []byte) {
	t.Helper()
	c := p.dial(t)
	buf, err := (&pgproto3.CancelRequest{ProcessID: pid, SecretKey: secret}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(buf); err != nil {
		t.Fatal(err)
	}
	if b := readUntilClosed(t, c); len(b) != 0 {
		t.Errorf("proxy answered a cancel request with %q", b)
	}
}

// checkBackendStartup checks what the branch server was sent: protocol 3.0, database
// db, user u, options opts (absent if ""), and no pgbranch.* or _pq_.* parameter.
func checkBackendStartup(t *testing.T, m pgproto3.StartupMessage, db, opts string) {
	t.Helper()
	if m.ProtocolVersion != pgproto3.ProtocolVersion30 {
		t.Errorf("branch server got protocol %#x, want 3.0", m.ProtocolVersion)
	}
	params := m.Parameters
	if params["database"] != db {
		t.Errorf("branch server got database %q, want %q", params["database"], db)
	}
	if params["user"] != "u" {
		t.Errorf("branch server got user %q, want %q", params["user"], "u")
	}
	got, ok := params["options"]
	if opts == "" && ok {
		t.Errorf("branch server got options %q, want none", got)
	} else if opts != "" && got != opts {
		t.Errorf("branch server got options %q, want %q", got, opts)
	}
	for k, v := range params {
		if strings.Contains(strings.ToLower(k), "pgbranch") || strings.Contains(strings.ToLower(v), "pgbranch") ||
			strings.HasPrefix(k, "_pq_.") {
			t.Errorf("branch server got %q=%q", k, v)
		}
	}
}

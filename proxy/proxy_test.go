package proxy_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

func TestSession(t *testing.T) {
	t.Parallel()
	p, fb, fs := setup(t, defaultConfig(), scriptOK, nil)

	conn := p.mustConnect(t, "dbname=app@feat")
	route := recv(t, fb.routes, "Acquire")
	if route.Database != "app" || route.Branch != "feat" || route.Options != (router.Options{}) {
		t.Errorf("route = %+v, want database app, branch feat, no options", route)
	}
	checkBackendStartup(t, recv(t, fs.startups, "startup at the branch server"), "app", "")

	if v := conn.ParameterStatus("server_version"); v != "15.0" {
		t.Errorf("server_version = %q, want the branch server's 15.0", v)
	}
	if bytes.Equal(conn.SecretKey(), backendSecret) {
		t.Errorf("client was given the branch server's own secret %v", conn.SecretKey())
	}
	if conn.PID() != backendPID {
		t.Errorf("client was told pid %d, want the backend's real %d", conn.PID(), backendPID)
	}
	if len(conn.SecretKey()) != len(backendSecret) {
		t.Errorf("client key has %d secret bytes, want %d as the branch server's", len(conn.SecretKey()), len(backendSecret))
	}
	query(t, conn)
	query(t, conn)

	lease := fb.lease(t, 0)
	if n := lease.releases.Load(); n != 0 {
		t.Fatalf("lease released %d times while the session is open", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	lease.waitReleased(t)
	p.shutdown(within) // every handler has returned after this
	if n := lease.releases.Load(); n != 1 {
		t.Errorf("lease released %d times, want exactly once", n)
	}
	if n := p.srv.Stats.Accepted.Load(); n != 1 {
		t.Errorf("Stats.Accepted = %d, want 1", n)
	}
	if n := p.srv.Stats.Active.Load(); n != 0 {
		t.Errorf("Stats.Active = %d after shutdown, want 0", n)
	}
	noneYet(t, fs.cancels, "cancel request")
}

func TestRouting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		extra     string
		wantRoute router.Route // Params not compared
		wantDB    string       // database the branch server sees
		wantOpts  string       // options the branch server sees; "" for none
	}{
		{name: "database at branch", extra: "dbname=app@feat",
			wantRoute: router.Route{Database: "app", Branch: "feat"}, wantDB: "app"},
		{name: "percent-encoded at sign", extra: "dbname=app%40feat",
			wantRoute: router.Route{Database: "app", Branch: "feat"}, wantDB: "app"},
		{name: "default branch", extra: "dbname=app",
			wantRoute: router.Route{Database: "app", Branch: "main"}, wantDB: "app"},
		{name: "ttl option stripped, work_mem kept", extra: "dbname=app@feat options='-c pgbranch.ttl=1h -c work_mem=4MB'",
			wantRoute: router.Route{Database: "app", Branch: "feat", Options: router.Options{TTL: time.Hour}},
			wantDB:    "app", wantOpts: "-c work_mem=4MB"},
		{name: "only pgbranch options", extra: "dbname=app@feat options='-c pgbranch.ephemeral=on --pgbranch.from=main'",
			wantRoute: router.Route{Database: "app", Branch: "feat", Options: router.Options{Ephemeral: true, From: "main"}},
			wantDB:    "app"},
		{name: "protocol 3.2", extra: "dbname=app@feat max_protocol_version=3.2",
			wantRoute: router.Route{Database: "app", Branch: "feat"}, wantDB: "app"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, fb, fs := setup(t, defaultConfig(), scriptOK, nil)
			conn := p.mustConnect(t, tt.extra)
			route := recv(t, fb.routes, "Acquire")
			route.Params = nil
			if route.Database != tt.wantRoute.Database || route.Branch != tt.wantRoute.Branch || route.Options != tt.wantRoute.Options {
				t.Errorf("route = %+v, want %+v", route, tt.wantRoute)
			}
			checkBackendStartup(t, recv(t, fs.startups, "startup at the branch server"), tt.wantDB, tt.wantOpts)
			query(t, conn)
		})
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	p, fb, fs := setup(t, defaultConfig(), scriptOK, nil)
	conn := p.mustConnect(t, "dbname=app@feat")
	query(t, conn)

	// The client's key reaches the branch server as the server's own key.
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := conn.CancelRequest(ctx); err != nil {
		t.Fatalf("CancelRequest: %v", err)
	}
	got := recv(t, fs.cancels, "cancel request at the branch server")
	if got.ProcessID != backendPID || !bytes.Equal(got.SecretKey, backendSecret) {
		t.Errorf("branch server got cancel key %d/%v, want %d/%v", got.ProcessID, got.SecretKey, backendPID, backendSecret)
	}

	// The proxy forwards before it closes the client's connection, so once
	// sendCancel returns, anything forwarded has arrived.
	secret := make([]byte, 4)
	binary.BigEndian.PutUint32(secret, rand.Uint32())
	p.sendCancel(t, rand.Uint32N(1<<31), secret)
	noneYet(t, fs.cancels, "cancel request for a wrong key")
	p.sendCancel(t, backendPID, backendSecret) // the server's key means nothing to the proxy
	noneYet(t, fs.cancels, "cancel request for the branch server's own key")

	// The session still works, and its key dies with it.
	query(t, conn)
	pid, key := conn.PID(), bytes.Clone(conn.SecretKey())
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	fb.lease(t, 0).waitReleased(t) // the key is revoked before the lease is released
	p.sendCancel(t, pid, key)
	noneYet(t, fs.cancels, "cancel request for an ended session")

	if n := p.srv.Stats.Cancels.Load(); n != 4 {
		t.Errorf("Stats.Cancels = %d, want 4", n)
	}
}

// TestCancelKeyRevokedWhenLoginFails: a branch server that sends BackendKeyData and
// then an ErrorResponse: the client gets the server's error and no key, and no key
// of that session is live in the proxy's cancel map.
func TestCancelKeyRevokedWhenLoginFails(t *testing.T) {
	t.Parallel()
	p, fb, fs := setup(t, defaultConfig(), scriptErrorAfterKey, nil)
	c := p.dial(t)
	res := rawLogin(t, c, pgproto3.ProtocolVersion30, map[string]string{"user": "u", "database": "app@feat"})
	if res.key != nil || res.err == nil || res.err.Code != "53300" {
		t.Fatalf("login = key %v, error %v; want the server's 53300 and no key", res.key, res.err)
	}
	readUntilClosed(t, c)
	fb.lease(t, 0).waitReleased(t)
	p.sendCancel(t, backendPID, backendSecret)
	noneYet(t, fs.cancels, "cancel request for a session whose login failed")
}

// TestSilentBranchServer: a branch server that takes the startup packet and never
// answers must not hold the session's handler and lease for ever: the login is bounded
// (by AcquireTimeout here), and Shutdown must be able to end it.
func TestSilentBranchServer(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.AcquireTimeout = time.Second
	p, fb, fs := setup(t, cfg, scriptSilent, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if conn, err := pgconn.Connect(ctx, p.connString("dbname=app@feat")); err == nil {
		conn.Close(ctx)
		t.Fatal("connected to a silent branch server")
	}
	recv(t, fs.startups, "startup at the branch server")
	fb.lease(t, 0).waitReleased(t)
}

// TestBranchServerGoneDuringStartup: a branch server that takes the connection and
// closes it unanswered (it exited as the lease was taken) gets a second dial, which
// the lease answers with the server started again; the client sees nothing of it.
// A second such close is the client's error.
func TestBranchServerGoneDuringStartup(t *testing.T) {
	t.Parallel()
	p, _, fs := setup(t, defaultConfig(), scriptOK, nil, func(fb *fakeBranches) { fb.cutDials.Store(1) })
	conn := p.mustConnect(t, "dbname=app@feat")
	recv(t, fs.startups, "startup at the branch server")
	query(t, conn)

	// Cut twice: the client may try again (57P03), and the log has the cause.
	p2, fb2, _ := setup(t, defaultConfig(), scriptOK, nil, func(fb *fakeBranches) { fb.cutDials.Store(2) })
	_, err := p2.connect(t, "dbname=app@feat")
	if pe := pgError(t, err); pe.Code != "57P03" {
		t.Errorf("SQLSTATE = %s (%q), want 57P03", pe.Code, pe.Message)
	} else {
		checkErrorID(t, p2, pe.Detail)
	}
	fb2.lease(t, 0).waitReleased(t)
}

// TestSilentBranchServerTimesOut: a client that waits longer than the login's
// bound is told 57P03 (try again), not an internal error.
func TestSilentBranchServerTimesOut(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.AcquireTimeout = 300 * time.Millisecond
	p, fb, _ := setup(t, cfg, scriptSilent, nil)
	_, err := p.connect(t, "dbname=app@feat")
	if pe := pgError(t, err); pe.Code != "57P03" || pe.Detail != "" {
		t.Errorf("SQLSTATE = %s (%q, %q), want 57P03 without an error id", pe.Code, pe.Message, pe.Detail)
	}
	fb.lease(t, 0).waitReleased(t)
}

func TestBranchServerErrorPassesThrough(t *testing.T) {
	t.Parallel()
	p, fb, _ := setup(t, defaultConfig(), scriptAuthError, nil)
	_, err := p.connect(t, "dbname=app@feat")
	pe := pgError(t, err)
	if pe.Code != "28P01" || pe.Message != `password authentication failed for user "u"` {
		t.Errorf("error = %s %q, want the branch server's 28P01", pe.Code, pe.Message)
	}
	lease := fb.lease(t, 0)
	lease.waitReleased(t)
	p.shutdown(within)
	if n := lease.releases.Load(); n != 1 {
		t.Errorf("lease released %d times, want once", n)
	}
}

// TestBranchServerForkFailure: a branch server at its process limit answers a new
// session with the postmaster's old-style error; the client gets its text as a
// protocol 3 error, 53000 with a hint, rather than a server "not accepting
// connections" for a reply the proxy could not parse.
func TestBranchServerForkFailure(t *testing.T) {
	t.Parallel()
	p, fb, fs := setup(t, defaultConfig(), scriptForkFailed, nil)
	_, err := p.connect(t, "dbname=app@feat")
	pe := pgError(t, err)
	if pe.Code != "53000" || pe.Severity != "FATAL" || pe.Message != forkFailure || pe.Hint == "" {
		t.Errorf("error = %s %s %q (hint %q), want FATAL 53000 %q with a hint", pe.Severity, pe.Code, pe.Message, pe.Hint, forkFailure)
	}
	recv(t, fs.startups, "startup at the branch server")
	noneYet(t, fs.startups, "a second startup at the branch server")
	fb.lease(t, 0).waitReleased(t)
}

// TestBranchServerRecovering: a branch server whose postmaster recovers from a
// crash (a backend killed at its memory limit) refuses sessions with 57P03 for a
// moment; a client waits for it, as for a branch that wakes, and gets the
// server's refusal only when --startup-timeout runs out first.
func TestBranchServerRecovering(t *testing.T) {
	t.Parallel()
	p, _, fs := setup(t, defaultConfig(), scriptOK, nil)
	fs.recovering.Store(3)
	conn := p.mustConnect(t, "dbname=app@feat")
	query(t, conn)
	closeConn(t, conn)
	for i := range 4 {
		recv(t, fs.startups, "startup "+strconv.Itoa(i+1)+" at the branch server")
	}

	cfg := defaultConfig()
	cfg.AcquireTimeout = 500 * time.Millisecond
	p, _, fs = setup(t, cfg, scriptOK, nil)
	fs.recovering.Store(1 << 30)
	_, err := p.connect(t, "dbname=app@feat")
	if pe := pgError(t, err); pe.Code != "57P03" || !strings.HasPrefix(pe.Message, "the database system is") {
		t.Errorf("error = %s %q, want the server's 57P03", pe.Code, pe.Message)
	}
}

// TestBranchServerRecoveringBacksOff: a client waiting for a recovering server
// asks less often as it waits, since each try forks a process in the server that
// many clients asking at a fixed pace would take from the recovery.
func TestBranchServerRecoveringBacksOff(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.AcquireTimeout = 2 * time.Second
	p, _, fs := setup(t, cfg, scriptOK, nil)
	fs.recovering.Store(1 << 30)
	if _, err := p.connect(t, "dbname=app@feat"); pgError(t, err).Code != "57P03" {
		t.Fatalf("error = %v, want the server's 57P03", err)
	}
	if n := len(fs.startups); n > 10 {
		t.Errorf("%d startups at the recovering server in %v, want at most 10", n, cfg.AcquireTimeout)
	}
}

// TestBranchServerAsksForPassword: the proxy has authenticated the client; a branch
// server that asks again is an internal error, and the client is not asked.
func TestBranchServerAsksForPassword(t *testing.T) {
	t.Parallel()
	p, fb, _ := setup(t, defaultConfig(), scriptPassword, nil)
	_, err := p.connect(t, "dbname=app@feat")
	pe := pgError(t, err)
	if pe.Code != "XX000" {
		t.Errorf("SQLSTATE = %s (%q), want XX000", pe.Code, pe.Message)
	}
	checkErrorID(t, p, pe.Detail)
	fb.lease(t, 0).waitReleased(t)
}

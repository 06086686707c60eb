package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
)

// queriesSeen drains the fake server's query log.
func queriesSeen(fs *fakeServer) []string {
	var q []string
	for {
		select {
		case s := <-fs.queries:
			q = append(q, s)
		default:
			return q
		}
	}
}

func closeConn(t *testing.T, conn *pgconn.PgConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// relays runs a test with each relay: the epoll pump and the goroutine pair.
func relays(t *testing.T, fn func(t *testing.T, goroutine bool)) {
	for _, g := range []bool{false, true} {
		name := "pump"
		if g {
			name = "goroutines"
		}
		t.Run(name, func(t *testing.T) { t.Parallel(); fn(t, g) })
	}
}

func reuseConfig(goroutine bool) proxy.Config {
	cfg := defaultConfig()
	cfg.Reuse, cfg.GoroutineRelay = true, goroutine
	return cfg
}

// TestReuseIdleServerSession: a client that leaves its session idle has its server
// session reset and parked, and the next client with the same parameters gets it:
// no new startup at the server, the same backend PID, a new cancel secret, and the
// server never saw the first client's Terminate.
func TestReuseIdleServerSession(t *testing.T) {
	relays(t, func(t *testing.T, goroutine bool) {
		p, fb, fs := setup(t, reuseConfig(goroutine), scriptOK, nil)
		first := p.mustConnect(t, "dbname=app@feat application_name=one")
		recv(t, fs.startups, "startup at the branch server")
		query(t, first)
		pid, secret := first.PID(), append([]byte(nil), first.SecretKey()...)
		closeConn(t, first)
		fb.lease(t, 0).waitReleased(t)
		fb.waitParks(t, 1)
		if fb.parks.Load() != 1 || fb.parked() != 1 {
			t.Fatalf("parked %d (Park %d), want the idle server session parked", fb.parked(), fb.parks.Load())
		}
		// The fake server reports no application_name at start-up, so the reset
		// sets the leaving client's, in the same round trip.
		if q := queriesSeen(fs); len(q) != 3 || q[1] != "DISCARD ALL" || q[2] != "SET application_name = 'one'" {
			t.Fatalf("server saw %q, want the client's query, DISCARD ALL, then its application_name set", q)
		}
		if n := fs.ended.Load(); n != 0 {
			t.Fatalf("%d server sessions ended; the parked one must stay open", n)
		}

		second := p.mustConnect(t, "dbname=app@feat application_name=two")
		noneYet(t, fs.startups, "startup for a client that could reuse a parked session")
		if second.PID() != pid {
			t.Errorf("second client told pid %d, want the reused backend's %d", second.PID(), pid)
		}
		if string(second.SecretKey()) == string(secret) {
			t.Error("second client got the first client's cancel secret")
		}
		if v := second.ParameterStatus("application_name"); v != "two" {
			t.Errorf("application_name = %q, want two", v)
		}
		if v := second.ParameterStatus("server_version"); v != "15.0" {
			t.Errorf("server_version = %q, want the start-up's 15.0", v)
		}
		if q := queriesSeen(fs); len(q) != 1 || q[0] != "SET application_name = 'two'" {
			t.Fatalf("server saw %q, want the application_name applied with SET", q)
		}
		query(t, second)
		p.sendCancel(t, pid, secret) // the first client's key died with its session
		noneYet(t, fs.cancels, "cancel with a key of an ended session")
		closeConn(t, second)
		fb.lease(t, 1).waitReleased(t)
		fb.waitParks(t, 2)
		queriesSeen(fs)

		// A client with the application_name the session was parked with needs no SET.
		third := p.mustConnect(t, "dbname=app@feat application_name=two")
		if v := third.ParameterStatus("application_name"); v != "two" {
			t.Errorf("application_name = %q, want two", v)
		}
		if q := queriesSeen(fs); len(q) != 0 {
			t.Fatalf("server saw %q for a client with the parked session's application_name, want nothing", q)
		}
	})
}

// TestNoReuseOutsideIdle: sessions that end inside a transaction, or with a query
// unanswered, or whose parameters differ, never share a server session.
func TestNoReuseOutsideIdle(t *testing.T) {
	relays(t, func(t *testing.T, goroutine bool) {
		p, fb, fs := setup(t, reuseConfig(goroutine), scriptOK, nil)
		conn := p.mustConnect(t, "dbname=app@feat")
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		if _, err := conn.Exec(ctx, "begin").ReadAll(); err != nil {
			t.Fatal(err)
		}
		closeConn(t, conn)
		fb.lease(t, 0).waitReleased(t)
		if fb.parks.Load() != 0 {
			t.Fatal("a session left in a transaction was parked")
		}
		for _, q := range queriesSeen(fs) {
			if q == "DISCARD ALL" {
				t.Fatal("a session left in a transaction was reset for reuse")
			}
		}

		conn = p.mustConnect(t, "dbname=app@feat")
		closeConn(t, conn)
		fb.lease(t, 1).waitReleased(t)
		conn = p.mustConnect(t, "dbname=app@feat options='-c work_mem=1MB'")
		recv(t, fs.startups, "startup")
		recv(t, fs.startups, "startup")
		recv(t, fs.startups, "startup for other parameters")
		closeConn(t, conn)
	})
}

// TestReuseOff: without Reuse the client's Terminate reaches the server and nothing
// is parked.
func TestReuseOff(t *testing.T) {
	p, fb, fs := setup(t, defaultConfig(), scriptOK, nil)
	conn := p.mustConnect(t, "dbname=app@feat")
	query(t, conn)
	closeConn(t, conn)
	fb.lease(t, 0).waitReleased(t)
	if fb.parks.Load() != 0 {
		t.Fatal("parked with reuse off")
	}
	for deadline := time.Now().Add(within); fs.ended.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server session did not end with its client")
		}
	}
}

// TestServerLifetime: a server session older than Config.ServerLifetime is closed
// when its client leaves, not reset and parked, and the next client gets a new one.
func TestServerLifetime(t *testing.T) {
	cfg := reuseConfig(false)
	cfg.ServerLifetime = time.Nanosecond
	p, fb, fs := setup(t, cfg, scriptOK, nil)
	conn := p.mustConnect(t, "dbname=app@feat")
	recv(t, fs.startups, "startup at the branch server")
	query(t, conn)
	closeConn(t, conn)
	fb.lease(t, 0).waitReleased(t)
	for deadline := time.Now().Add(within); fs.ended.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server session past its lifetime did not end with its client")
		}
	}
	if fb.parks.Load() != 0 {
		t.Fatal("a server session past its lifetime was parked")
	}
	if q := queriesSeen(fs); len(q) != 1 {
		t.Fatalf("server saw %q, want only the client's query (no reset for a session that is closed)", q)
	}
	next := p.mustConnect(t, "dbname=app@feat")
	recv(t, fs.startups, "a new server session for the next client")
	closeConn(t, next)
}

// TestParkedSessionsGiveWayToClients: a branch server with no connection slot
// left for a new session (53300) has its parked sessions, which hold slots no
// client uses, closed until it takes the session; a client is refused only when
// the server's slots are its clients'.
func TestParkedSessionsGiveWayToClients(t *testing.T) {
	relays(t, func(t *testing.T, goroutine bool) {
		p, fb, fs := setup(t, reuseConfig(goroutine), scriptOK, nil)
		fs.maxSessions = 2
		for i, opts := range []string{"-c work_mem=1MB", "-c work_mem=2MB"} {
			conn := p.mustConnect(t, "dbname=app@feat options='"+opts+"'")
			query(t, conn)
			closeConn(t, conn)
			fb.waitParks(t, int32(i+1))
		}
		if n := fb.parked(); n != 2 {
			t.Fatalf("%d server sessions parked, want 2", n)
		}

		// Both slots are parked sessions of other startup keys.
		first := p.mustConnect(t, "dbname=app@feat")
		query(t, first)
		if n := fb.parked(); n != 1 {
			t.Errorf("%d server sessions parked, want 1: one closed to make room", n)
		}
		second := p.mustConnect(t, "dbname=app@feat")
		query(t, second)
		if n := fb.parked(); n != 0 {
			t.Errorf("%d server sessions parked, want none", n)
		}

		// Every slot is a client's now: the server's refusal reaches the client.
		_, err := p.connect(t, "dbname=app@feat")
		if pe := pgError(t, err); pe.Code != "53300" {
			t.Errorf("third client got %s %q, want the server's 53300", pe.Code, pe.Message)
		}
		closeConn(t, first)
		closeConn(t, second)
	})
}

// TestParkedSessionsGiveWayAtProcessLimit: a branch server that cannot fork a
// backend for a new session (a container's pids limit) has parked sessions, whose
// backends hold processes no client uses, closed until it takes the session; a
// client is refused, with 53000, only when the processes are its clients'.
func TestParkedSessionsGiveWayAtProcessLimit(t *testing.T) {
	p, fb, fs := setup(t, reuseConfig(false), scriptOK, nil)
	fs.maxSessions = 1
	fs.forkFails = true
	conn := p.mustConnect(t, "dbname=app@feat options='-c work_mem=1MB'")
	query(t, conn)
	closeConn(t, conn)
	fb.waitParks(t, 1)

	first := p.mustConnect(t, "dbname=app@feat")
	query(t, first)
	if n := fb.parked(); n != 0 {
		t.Errorf("%d server sessions parked, want none: the parked one closed to make room", n)
	}
	_, err := p.connect(t, "dbname=app@feat")
	if pe := pgError(t, err); pe.Code != "53000" || pe.Message != forkFailure {
		t.Errorf("second client got %s %q, want 53000 %q", pe.Code, pe.Message, forkFailure)
	}
	closeConn(t, first)
}

// TestRoleLimitFreesItsOwn: a refusal for a role's connection limit is for want
// of that role's slots: the proxy ends parked sessions of that user (under other
// startup parameters), not those of other users, and the client gets in.
func TestRoleLimitFreesItsOwn(t *testing.T) {
	p, fb, fs := setup(t, reuseConfig(false), scriptOK, nil)
	fs.maxSessions = 2
	fs.tooMany = `too many connections for role "u"`
	for i, extra := range []string{"user=v", "options='-c work_mem=1MB'"} { // v parked first: the oldest
		conn := p.mustConnect(t, "dbname=app@feat "+extra)
		query(t, conn)
		closeConn(t, conn)
		fb.waitParks(t, int32(i+1))
	}
	conn := p.mustConnect(t, "dbname=app@feat")
	query(t, conn)
	if n := fb.parked(); n != 1 || !fb.parkedWith("user\x00v\x00") {
		t.Errorf("%d server sessions parked, want 1, user v's (kept: %v), u's ended", n, fb.parkedWith("user\x00v\x00"))
	}
	closeConn(t, conn)
}

// TestAppNameFromOptions: a client that sets application_name only through
// options is told it, and a reused session keeps it rather than losing it.
func TestAppNameFromOptions(t *testing.T) {
	relays(t, func(t *testing.T, goroutine bool) {
		p, fb, fs := setup(t, reuseConfig(goroutine), scriptOK, nil)
		const opts = `options='-c application_name=from\\ opts'`
		first := p.mustConnect(t, "dbname=app@feat "+opts)
		if v := first.ParameterStatus("application_name"); v != "from opts" {
			t.Errorf("application_name = %q, want the one options set", v)
		}
		query(t, first)
		closeConn(t, first)
		fb.waitParks(t, 1)
		// The fake server reports no application_name at start-up: the reset
		// sets the one options give.
		if q := queriesSeen(fs); len(q) != 3 || q[2] != "SET application_name = 'from opts'" {
			t.Fatalf("server saw %q, want the client's query, DISCARD ALL, then options' application_name set", q)
		}

		second := p.mustConnect(t, "dbname=app@feat "+opts)
		if v := second.ParameterStatus("application_name"); v != "from opts" {
			t.Errorf("reused session: application_name = %q, want the one options set", v)
		}
		if q := queriesSeen(fs); len(q) != 0 {
			t.Fatalf("server saw %q, want nothing: the parked session has options' application_name", q)
		}
		// A startup parameter overrides options, as in Postgres.
		closeConn(t, second)
		fb.waitParks(t, 2)
		third := p.mustConnect(t, "dbname=app@feat application_name=param "+opts)
		if v := third.ParameterStatus("application_name"); v != "param" {
			t.Errorf("application_name = %q, want the startup parameter's", v)
		}
		closeConn(t, third)
	})
}

// TestAppNameAsServerTakesIt: a client is told the application_name the server
// took, which Postgres cuts to 63 bytes and cleans of bytes that are not printable
// ASCII, on a fresh server session and on a reused one, whether the reuse needs a
// SET or not.
func TestAppNameAsServerTakesIt(t *testing.T) {
	long := strings.Repeat("a", 62) + "ñb"
	relays(t, func(t *testing.T, goroutine bool) {
		p, fb, _ := setup(t, reuseConfig(goroutine), scriptAppName, nil)
		for i, app := range []string{long, long, "héllo\tw'x", "héllo\tw'x", "plain", long} {
			conn := p.mustConnect(t, "dbname=app@feat application_name="+quoteConnValue(app))
			want := pgAppName(app)
			if v := conn.ParameterStatus("application_name"); v != want {
				t.Errorf("client %d (%q): application_name = %q, want %q as the server took it", i, app, v, want)
			}
			query(t, conn)
			closeConn(t, conn)
			fb.waitParks(t, int32(i+1))
		}
	})
}

// quoteConnValue quotes v for a libpq keyword/value connection string.
func quoteConnValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(v) + "'"
}

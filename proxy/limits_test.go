package proxy_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
)

// TestIsolation: clients that break the protocol do not disturb a session.
func TestIsolation(t *testing.T) {
	t.Parallel()
	p, _, _ := setup(t, defaultConfig(), scriptOK, nil)
	conn := p.mustConnect(t, "dbname=app@feat")
	query(t, conn)

	bad := p.dial(t)
	bad.Write(garbage(500))
	huge := p.dial(t)
	huge.Write(binary.BigEndian.AppendUint32(nil, 100<<10))
	silent := p.dial(t) // stays open, mid-startup, through the next query
	silent.Write([]byte{0, 0})

	if b := readUntilClosed(t, huge); len(b) == 0 || parseError(t, b).Code != "08P01" {
		t.Errorf("100 KB header: got %q, want 08P01", b)
	}
	readUntilClosed(t, bad)
	query(t, conn)
	// A new session can start as well.
	query(t, p.mustConnect(t, "dbname=app@other"))
}

// TestStartupTimeout: a client that sends nothing, or half a packet, is closed after
// StartupTimeout and does not hold up other clients meanwhile.
func TestStartupTimeout(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.StartupTimeout = 300 * time.Millisecond
	p, _, _ := setup(t, cfg, scriptOK, nil)

	silent := p.dial(t)
	half := p.dial(t)
	if _, err := half.Write(packet(protocol30, "user\x00u\x00")[:6]); err != nil {
		t.Fatal(err)
	}
	// The session's own startup deadline is lifted after the startup packet, so it
	// outlives StartupTimeout.
	conn := p.mustConnect(t, "dbname=app@feat")
	query(t, conn)

	for name, c := range map[string]net.Conn{"silent client": silent, "half-packet client": half} {
		if b := readUntilClosed(t, c); len(b) != 0 {
			t.Errorf("%s got %q, want the connection closed without an answer", name, b)
		}
	}
	query(t, conn)
}

// TestShutdownClosesSessions: after the grace period, Shutdown closes what is left
// and returns once every handler has returned.
func TestShutdownClosesSessions(t *testing.T) {
	t.Parallel()
	p, fb, _ := setup(t, defaultConfig(), scriptOK, nil)
	conn := p.mustConnect(t, "dbname=app@feat")
	query(t, conn)
	pending := p.dial(t) // accepted, mid-startup

	p.shutdown(0)
	if n := fb.lease(t, 0).releases.Load(); n != 1 {
		t.Errorf("lease released %d times after Shutdown, want once", n)
	}
	if n := p.srv.Stats.Active.Load(); n != 0 {
		t.Errorf("Stats.Active = %d after Shutdown, want 0", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if _, err := conn.Exec(ctx, "select 1").ReadAll(); err == nil {
		t.Error("query after Shutdown succeeded")
	}
	readUntilClosed(t, pending)
	if c, err := net.DialTimeout("tcp", p.addr, within); err == nil {
		c.Close()
		t.Error("proxy still accepting after Shutdown")
	}
}

func TestMaxClientConns(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.MaxClientConns = 1
	p, fb, _ := setup(t, cfg, scriptOK, nil)
	conn := p.mustConnect(t, "dbname=app@feat")

	// A raw client that sends nothing: the refusal comes first, and no unsent
	// startup bytes can turn the close into a reset.
	b := readUntilClosed(t, p.dial(t))
	if er := parseError(t, b); er.Code != "53300" {
		t.Errorf("second client got %s %q, want 53300", er.Code, er.Message)
	}
	query(t, conn)

	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	conn.Close(ctx)
	fb.lease(t, 0).waitReleased(t)
	// The slot frees when the handler returns, just after the release: retry until
	// the bound.
	deadline := time.Now().Add(within)
	for {
		_, err := p.connect(t, "dbname=app@feat")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection within %v of the first one closing: %v", within, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestShutdownSays57P01: a relayed session the proxy closes at the end of its
// grace is told so with FATAL 57P01, as Postgres tells one at a fast shutdown,
// rather than having its connection dropped, on either relay.
func TestShutdownSays57P01(t *testing.T) {
	relays(t, func(t *testing.T, goroutine bool) {
		p, _, _ := setup(t, reuseConfig(goroutine), scriptOK, nil)
		c := p.dial(t)
		if res := rawLogin(t, c, pgproto3.ProtocolVersion30, map[string]string{"user": "u", "database": "app@feat"}); res.err != nil {
			t.Fatalf("login: %v", res.err)
		}
		// A query answered: the session is on the relay.
		fe := pgproto3.NewFrontend(c, c)
		fe.Send(&pgproto3.Query{String: "select 1"})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(within))
		for {
			msg, err := fe.Receive()
			if err != nil {
				t.Fatalf("query: %v", err)
			}
			if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
				break
			}
		}
		p.shutdown(0)
		if er := parseError(t, readUntilClosed(t, c)); er.Code != "57P01" || er.Severity != "FATAL" {
			t.Errorf("told %s %s %q at shutdown, want FATAL 57P01", er.Severity, er.Code, er.Message)
		}
	})
}

// A TLS session, which goroutines relay whatever the relay, is told 57P01 too.
func TestShutdownSays57P01TLS(t *testing.T) {
	t.Parallel()
	cfg := reuseConfig(false)
	cfg.TLS, cfg.TLSMode = selfSigned(t), proxy.TLSAllow
	p, _, _ := setup(t, cfg, scriptOK, nil)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	conn, err := pgconn.Connect(ctx, fmt.Sprintf("host=127.0.0.1 port=%s user=u dbname=app@feat sslmode=require", p.port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "select 1").ReadAll(); err != nil {
		t.Fatal(err)
	}
	p.shutdown(0)
	_, err = conn.Exec(ctx, "select 1").ReadAll()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57P01" || pe.Severity != "FATAL" {
		t.Errorf("after shutdown: %v, want FATAL 57P01", err)
	}
}

// A second Shutdown returns, as the first did.
func TestShutdownTwice(t *testing.T) {
	t.Parallel()
	p, _, _ := setup(t, defaultConfig(), scriptOK, nil)
	p.shutdown(0)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	p.srv.Shutdown(ctx)
}

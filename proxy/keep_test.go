package proxy_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// keeperBranches stand for a front: every session goes to one node (addr), on a
// connection kept from an earlier session when there is one.
type keeperBranches struct {
	addr string
	mu   sync.Mutex
	idle []net.Conn
}

func (b *keeperBranches) Roles(context.Context, router.Route) (roles.Set, error) { return nil, nil }

func (b *keeperBranches) Acquire(context.Context, router.Route) (proxy.Lease, error) {
	return &keeperLease{b: b}, nil
}

func (b *keeperBranches) kept() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.idle)
}

type keeperLease struct {
	b    *keeperBranches
	kept bool
}

func (l *keeperLease) Dial(ctx context.Context) (net.Conn, error) {
	l.b.mu.Lock()
	if n := len(l.b.idle); n > 0 {
		c := l.b.idle[n-1]
		l.b.idle = l.b.idle[:n-1]
		l.b.mu.Unlock()
		l.kept = true
		return c, nil
	}
	l.b.mu.Unlock()
	l.kept = false
	var d net.Dialer
	return d.DialContext(ctx, "tcp", l.b.addr)
}

func (l *keeperLease) TakeIdle(string) io.Closer  { return nil }
func (l *keeperLease) Release()                   {}
func (l *keeperLease) Park(_ string, c io.Closer) { c.Close() }
func (l *keeperLease) RouteParams() map[string]string {
	return map[string]string{proxy.OptKeepConn: "on"}
}
func (l *keeperLease) Keep(c net.Conn) {
	l.b.mu.Lock()
	l.b.idle = append(l.b.idle, c)
	l.b.mu.Unlock()
}
func (l *keeperLease) Kept() bool { return l.kept }
func (l *keeperLease) DialNew(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", l.b.addr)
}

// chain starts a node (a proxy that keeps connections when keep is set, in front
// of a fake branch server) and a front before it; nb is the node's branches.
func chain(t *testing.T, goroutine, keep bool) (front, node *testProxy, kb *keeperBranches, nb *fakeBranches, fs *fakeServer) {
	cfg := reuseConfig(goroutine)
	cfg.KeepConns = keep
	node, nb, fs = setup(t, cfg, scriptOK, nil)
	kb = &keeperBranches{addr: node.addr}
	fcfg := defaultConfig()
	fcfg.GoroutineRelay = goroutine
	return startProxy(t, fcfg, kb), node, kb, nb, fs
}

// waitKept waits until the front keeps n connections.
func (b *keeperBranches) waitKept(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(within)
	for b.kept() != n {
		if time.Now().After(deadline) {
			t.Fatalf("the front keeps %d connections, want %d", b.kept(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestKeptConnection: sessions through a front that end idle leave their
// connection to the node open, and the next session takes it: the node accepts
// one connection for three sessions, and its branch server sees one start-up
// (the node parks its server session as for any client). A session that ends
// inside a transaction does not leave its connection.
func TestKeptConnection(t *testing.T) {
	relays(t, func(t *testing.T, goroutine bool) {
		front, node, kb, nb, fs := chain(t, goroutine, true)
		for i := range 3 {
			c := front.mustConnect(t, "dbname=app@feat")
			query(t, c)
			closeConn(t, c)
			kb.waitKept(t, 1)
			// The node parks its server session once it is reset; a session
			// that came sooner would start another, as any client's would.
			nb.waitParks(t, int32(i+1))
			if i == 0 {
				recv(t, fs.startups, "the branch server's start-up")
			}
		}
		noneYet(t, fs.startups, "a second start-up at the branch server")
		if n := node.srv.Stats.Accepted.Load(); n != 1 {
			t.Fatalf("node accepted %d connections for three sessions, want 1", n)
		}
		if n := front.srv.Stats.ConnsKept.Load(); n != 3 {
			t.Fatalf("front kept the connection %d times, want 3", n)
		}

		c := front.mustConnect(t, "dbname=app@feat")
		if err := c.Exec(context.Background(), "BEGIN").Close(); err != nil {
			t.Fatal(err)
		}
		closeConn(t, c)
		kb.waitKept(t, 0)
		c = front.mustConnect(t, "dbname=app@feat")
		query(t, c)
		closeConn(t, c)
		if n := node.srv.Stats.Accepted.Load(); n != 2 {
			t.Fatalf("node accepted %d connections, want a second after a session that ended in a transaction", n)
		}
	})
}

// TestKeptConnectionRefused: a node that does not keep connections says so at
// start-up, serves the session, and the front closes the connection after it.
func TestKeptConnectionRefused(t *testing.T) {
	relays(t, func(t *testing.T, goroutine bool) {
		front, node, kb, _, _ := chain(t, goroutine, false)
		for range 2 {
			c := front.mustConnect(t, "dbname=app@feat")
			query(t, c)
			closeConn(t, c)
		}
		if n := node.srv.Stats.Accepted.Load(); n != 2 || kb.kept() != 0 || front.srv.Stats.ConnsKept.Load() != 0 {
			t.Fatalf("node accepted %d, front keeps %d: want a connection per session, none kept", n, kb.kept())
		}
	})
}

// TestKeptConnectionGone: a kept connection the node closed meanwhile is
// replaced by a new one for the session that took it, not by another kept one
// (which may be gone too).
func TestKeptConnectionGone(t *testing.T) {
	front, node, kb, _, _ := chain(t, false, true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				var b [1]byte
				c.Read(b[:]) // close once the start-up arrives
				c.Close()
			}()
		}
	}()
	for range 2 {
		stale, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		kb.Keep(stale)
	}
	c := front.mustConnect(t, "dbname=app@feat")
	query(t, c)
	closeConn(t, c)
	if n := node.srv.Stats.Accepted.Load(); n != 1 {
		t.Fatalf("node accepted %d, want the session on a new connection", n)
	}
}

// TestKeptConnectionDrain: a node's drain closes the connections kept idle
// between sessions instead of waiting for them.
func TestKeptConnectionDrain(t *testing.T) {
	front, node, kb, _, _ := chain(t, false, true)
	c := front.mustConnect(t, "dbname=app@feat")
	query(t, c)
	closeConn(t, c)
	kb.waitKept(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if !node.srv.Drain(ctx) {
		t.Fatalf("the node's drain waited for a connection kept between sessions")
	}
}

// Keep is the test's way to put a connection in the front's pool.
func (b *keeperBranches) Keep(c net.Conn) { (&keeperLease{b: b}).Keep(c) }

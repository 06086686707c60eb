package front

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestAwaitOwnerSharesPoll: the clients waiting for one branch whose node is
// away share one read of its route per poll, however many they are: the node
// comes back on the third read, and the third read is the last, for all of them.
func TestAwaitOwnerSharesPoll(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	n := r.node("back", "10.0.0.5:1", time.Hour, 0)
	id, err := n.InsertBranch(ctx, catalog.Branch{Source: "app", Name: "b1", State: catalog.Running}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Heartbeat(ctx, "10.0.0.5:1", "", -time.Second, catalog.Load{}); err != nil {
		t.Fatal(err)
	}
	const clients, back = 16, 3
	b := New(r.cat, nil)
	b.ownerWait, b.pollEvery = time.Minute, 10*time.Millisecond
	pk := pollKey{routeKey{"app", "b1"}, id}
	waiters := func() int {
		b.polls.mu.Lock()
		defer b.polls.mu.Unlock()
		if p := b.polls.m[pk]; p != nil {
			return p.waiters
		}
		return 0
	}
	var reads atomic.Int64
	b.ownerRead = func(ctx context.Context, source, name string) (catalog.Route, error) {
		switch reads.Add(1) {
		case 1: // every client waits before the first read ends (or, were the poll not shared, a while)
			for start := time.Now(); waiters() < clients && time.Since(start) < 5*time.Second; {
				time.Sleep(time.Millisecond)
			}
		case back:
			if err := n.Heartbeat(ctx, "10.0.0.5:1", "", time.Hour, catalog.Load{}); err != nil {
				return catalog.Route{}, err
			}
		}
		return r.cat.RouteOf(ctx, source, name)
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Go(func() {
			if addr, err := addrOf(t, b, "app@b1"); err != nil || addr != "10.0.0.5:1" {
				errs <- fmt.Errorf("a client waiting for the node: %q %v", addr, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := reads.Load(); got != back {
		t.Fatalf("%d clients waiting read the route %d times, want %d: one read per poll", clients, got, back)
	}
	if got := waiters(); got != 0 {
		t.Fatalf("%d waiters left on the poll", got)
	}
}

// TestAcquireOneDeadline: the wait for an away node's lease and the connect
// retries share one deadline, set when Acquire begins: a lease handed out after
// a wait has what is left of it, not a wait of its own.
func TestAcquireOneDeadline(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	n := r.node("back", "10.0.0.5:1", time.Hour, 0)
	if _, err := n.InsertBranch(ctx, catalog.Branch{Source: "app", Name: "b1", State: catalog.Running}, "test"); err != nil {
		t.Fatal(err)
	}
	if err := n.Heartbeat(ctx, "10.0.0.5:1", "", -time.Second, catalog.Load{}); err != nil {
		t.Fatal(err)
	}
	b := New(r.cat, nil)
	b.ownerWait, b.pollEvery = time.Minute, 10*time.Millisecond
	b.ownerRead = func(ctx context.Context, source, name string) (catalog.Route, error) {
		if err := n.Heartbeat(ctx, "10.0.0.5:1", "", time.Hour, catalog.Load{}); err != nil {
			return catalog.Route{}, err
		}
		return r.cat.RouteOf(ctx, source, name)
	}
	l, err := b.Acquire(ctx, route(t, "app@b1"))
	if err != nil {
		t.Fatal(err)
	}
	if d := l.(*lease).deadline; !d.Before(time.Now().Add(b.ownerWait)) {
		t.Fatalf("the lease after a wait may connect until %v, a whole wait from now", d)
	}
}

// TestLeaseDialDeadline: every connect to an away node ends by the lease's
// deadline, and none is begun after it.
func TestLeaseDialDeadline(t *testing.T) {
	tries := 0
	l := &lease{node: "n", addr: "a", deadline: time.Now().Add(300 * time.Millisecond)}
	l.dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
		tries++
		if d, ok := ctx.Deadline(); !ok || d.After(l.deadline) {
			t.Errorf("connect %d may run until %v, after the lease's deadline %v", tries, d, l.deadline)
		}
		return nil, fmt.Errorf("dial tcp a: %w", syscall.ECONNREFUSED)
	}
	if _, err := l.Dial(context.Background()); codeOf(err) != "57P03" || tries == 0 {
		t.Fatalf("Dial to an away node: %v after %d tries", err, tries)
	}
	tries = 0
	l.deadline = time.Now().Add(-time.Second) // spent waiting for the node's lease
	if _, err := l.Dial(context.Background()); codeOf(err) != "57P03" || tries != 1 {
		t.Fatalf("Dial after the deadline: %v after %d tries, want one try", err, tries)
	}
}

// TestAwaitOwnerRidesOutFailedReads: a read of the route that fails while a
// client waits for an away node (the catalog failing over, a slow read) does
// not end the wait: the next poll reads again, and the client is served once
// the node's lease runs again.
func TestAwaitOwnerRidesOutFailedReads(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	n := r.node("back", "10.0.0.5:1", time.Hour, 0)
	if _, err := n.InsertBranch(ctx, catalog.Branch{Source: "app", Name: "b1", State: catalog.Running}, "test"); err != nil {
		t.Fatal(err)
	}
	if err := n.Heartbeat(ctx, "10.0.0.5:1", "", -time.Second, catalog.Load{}); err != nil {
		t.Fatal(err)
	}
	b := New(r.cat, nil)
	b.ownerWait, b.pollEvery = time.Minute, 10*time.Millisecond
	var reads atomic.Int64
	b.ownerRead = func(ctx context.Context, source, name string) (catalog.Route, error) {
		switch reads.Add(1) {
		case 1, 2:
			return catalog.Route{}, fmt.Errorf("read the route: %w", catalog.ErrUnavailable)
		case 3:
			if err := n.Heartbeat(ctx, "10.0.0.5:1", "", time.Hour, catalog.Load{}); err != nil {
				return catalog.Route{}, err
			}
		}
		return r.cat.RouteOf(ctx, source, name)
	}
	if addr, err := addrOf(t, b, "app@b1"); err != nil || addr != "10.0.0.5:1" {
		t.Fatalf("a client waiting for the node through two failed reads: %q %v, want it served", addr, err)
	}
	if got := reads.Load(); got != 3 {
		t.Fatalf("%d reads, want 3: two failed, then the node back", got)
	}
}

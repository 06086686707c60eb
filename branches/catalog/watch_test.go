package catalog_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestWatchRoutes: a watcher hears of a branch's insert, roles change and delete
// and of a node's registration, in commit order, and not of what routes nothing
// (heartbeats, last-use times, state changes, warm pool members); it is told
// that anything may have changed when it starts.
func TestWatchRoutes(t *testing.T) {
	c, dsn := backends[1].open(t)
	addSources(t, c, "app")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.NotifyRoutes(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.NotifyRoutes(ctx); err != nil { // again: nothing to do
		t.Fatal(err)
	}
	got := make(chan catalog.RouteChange, 100)
	listening := make(chan bool, 10)
	go openAgain(t, dsn).WatchRoutes(ctx, func(ch catalog.RouteChange) { got <- ch }, func(l bool) { listening <- l })
	if !<-listening {
		t.Fatal("not listening")
	}
	next := func() catalog.RouteChange {
		t.Helper()
		select {
		case ch := <-got:
			return ch
		case <-time.After(10 * time.Second):
			t.Fatal("no route change within 10s")
			return catalog.RouteChange{}
		}
	}
	if ch := next(); !ch.All {
		t.Fatalf("first change %+v, want All", ch)
	}
	if _, err := c.Register(ctx, "n1", "10.0.0.1:1", time.Hour); err != nil {
		t.Fatal(err)
	}
	if ch := next(); ch.Node != "n1" {
		t.Fatalf("registration: %+v", ch)
	}
	if err := c.Heartbeat(ctx, "10.0.0.1:1", "", time.Hour, catalog.Load{Running: 3}); err != nil {
		t.Fatal(err)
	}
	b := catalog.Branch{Source: "app", Name: "x", State: catalog.Creating}
	id, err := c.InsertBranch(ctx, b, "test")
	if err != nil {
		t.Fatal(err)
	}
	b.ID = id
	if ch := next(); ch.Source != "app" || ch.Branch != "x" {
		t.Fatalf("insert, after a heartbeat that routes nothing: %+v", ch)
	}
	if err := c.Touch(ctx, map[int64]time.Time{id: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b.State = catalog.Running // a state change routes nothing
	if err := c.UpdateBranch(ctx, b, "test"); err != nil {
		t.Fatal(err)
	}
	b.Roles = `{"alice":{}}`
	if err := c.UpdateBranch(ctx, b, "test"); err != nil {
		t.Fatal(err)
	}
	if ch := next(); ch.Branch != "x" {
		t.Fatalf("roles change, after a touch and a state change that route nothing: %+v", ch)
	}
	pool := catalog.Branch{Source: "app", Name: "_pool-1", State: catalog.Running, Pooled: true}
	if _, err := c.InsertBranch(ctx, pool, "warm pool"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteBranch(ctx, b, "test"); err != nil {
		t.Fatal(err)
	}
	if ch := next(); ch.Branch != "x" {
		t.Fatalf("delete: %+v", ch)
	}
	select {
	case ch := <-got:
		t.Fatalf("an extra change %+v", ch)
	default:
	}
}

// TestWatchProbes: a quiet watch checks that it still hears with probes of its
// own, which it hears back, so it stays listening (no reconnect) and hears the
// next change; other watchers' probes reach no one's fn.
func TestWatchProbes(t *testing.T) {
	defer catalog.SetProbeEvery(100 * time.Millisecond)()
	c, dsn := backends[1].open(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.NotifyRoutes(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan catalog.RouteChange, 100)
	var mu sync.Mutex
	var lives []bool
	for range 2 { // two watchers: each hears the other's probes
		go openAgain(t, dsn).WatchRoutes(ctx, func(ch catalog.RouteChange) { got <- ch },
			func(l bool) { mu.Lock(); lives = append(lives, l); mu.Unlock() })
	}
	time.Sleep(time.Second) // ten probe periods, quiet
	if _, err := c.Register(ctx, "n1", "10.0.0.1:1", time.Hour); err != nil {
		t.Fatal(err)
	}
	heard := 0
	deadline := time.After(10 * time.Second)
	for heard < 2 {
		select {
		case ch := <-got:
			switch {
			case ch.All:
			case ch.Node == "n1":
				heard++
			default:
				t.Fatalf("a watcher's fn got %+v", ch)
			}
		case <-deadline:
			t.Fatalf("the registration was heard by %d of 2 watchers", heard)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lives) != 2 || !lives[0] || !lives[1] {
		t.Fatalf("listening changes %v, want each watcher to start once and stay", lives)
	}
}

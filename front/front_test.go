package front

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/errs"
	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// rig is a SQLite catalog with a source "app" whose current seed has database
// app, and handles for nodes.
type rig struct {
	t   *testing.T
	dsn string
	cat *catalog.Catalog
}

func newRig(t *testing.T) *rig {
	t.Helper()
	dsn := filepath.Join(t.TempDir(), "catalog.db")
	cat, err := catalog.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	ctx := context.Background()
	if err := cat.AddSource(ctx, catalog.Source{Name: "app", Kind: "empty"}); err != nil {
		t.Fatal(err)
	}
	for _, gen := range []struct{ db, roles string }{{"old", `{"old":{}}`}, {"app", `{"alice":{}}`}} {
		sd, err := cat.AddSeed(ctx, catalog.Seed{Source: "app"})
		if err != nil {
			t.Fatal(err)
		}
		sd.State, sd.Databases, sd.Roles = catalog.SeedReady, []string{gen.db}, gen.roles
		if err := cat.UpdateSeed(ctx, sd); err != nil {
			t.Fatal(err)
		}
	}
	return &rig{t: t, dsn: dsn, cat: cat}
}

// node registers a node on its own handle and returns that handle.
func (r *rig) node(id, addr string, ttl time.Duration, running int) *catalog.Catalog {
	r.t.Helper()
	c, err := catalog.Open(r.dsn)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if _, err := c.Register(ctx, id, addr, ttl); err != nil {
		r.t.Fatal(err)
	}
	if ttl > 0 {
		if err := c.Heartbeat(ctx, addr, "", ttl, catalog.Load{Running: running}); err != nil {
			r.t.Fatal(err)
		}
	}
	return c
}

func route(t *testing.T, db string) router.Route {
	t.Helper()
	rt, err := router.Parse(map[string]string{"user": "alice", "database": db}, "main")
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func addrOf(t *testing.T, b *Branches, db string) (string, error) {
	t.Helper()
	l, err := b.Acquire(context.Background(), route(t, db))
	if err != nil {
		return "", err
	}
	return l.(*lease).addr, nil
}

// codeOf is the SQLSTATE a client is told for err: a ClientError's or an
// engine error's.
func codeOf(err error) string {
	var told interface{ SQLState() string }
	if errors.As(err, &told) {
		return told.SQLState()
	}
	return ""
}

// TestPlace: a new name goes to a live, active node with an address, always the
// same one for the same name (so that fronts agree), and names spread over the
// live nodes; with no node left the client gets 57P03.
func TestPlace(t *testing.T) {
	r := newRig(t)
	b := New(r.cat, nil)
	if _, err := addrOf(t, b, "app@new"); codeOf(err) != "57P03" {
		t.Fatalf("no nodes: %v, want 57P03", err)
	}
	r.node("a", "10.0.0.1:1", time.Hour, 5)
	r.node("b", "10.0.0.2:1", time.Hour, 1)
	r.node("gone", "10.0.0.3:1", -time.Second, 0)
	r.node("noaddr", "", time.Hour, 0)
	got := map[string]int{}
	for i := range 64 {
		name := fmt.Sprintf("app@n%d", i)
		addr, err := addrOf(t, b, name)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := addrOf(t, New(r.cat, nil), name); again != addr {
			t.Fatalf("%s placed on %s, then on %s", name, addr, again)
		}
		got[addr]++
	}
	if len(got) != 2 || got["10.0.0.1:1"] < 16 || got["10.0.0.2:1"] < 16 {
		t.Fatalf("64 names placed %v, want them spread over the two live nodes", got)
	}
}

// TestAcquireOwner: a branch goes to its owner, a new branch of a branch to its
// parent's owner; a branch of a node past its lease, a lost branch and a
// missing parent each get the client's SQLSTATE.
func TestAcquireOwner(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	n1 := r.node("n1", "10.0.0.1:1", time.Hour, 9)
	r.node("n2", "10.0.0.2:1", time.Hour, 0)
	if _, err := n1.InsertBranch(ctx, catalog.Branch{Source: "app", Name: "mine", State: catalog.Running}, "test"); err != nil {
		t.Fatal(err)
	}
	b := New(r.cat, nil)
	b.ownerWait = 300 * time.Millisecond
	if addr, err := addrOf(t, b, "app@mine"); err != nil || addr != "10.0.0.1:1" {
		t.Fatalf("app@mine on %q (%v), want its owner n1", addr, err)
	}
	child := route(t, "app@child")
	child.Options.From = "mine"
	if l, err := b.Acquire(ctx, child); err != nil || l.(*lease).addr != "10.0.0.1:1" {
		t.Fatalf("a branch of mine: %v %v, want its parent's node n1", l, err)
	}
	rt := route(t, "app@orphan")
	rt.Options.From = "nosuch"
	var ce *proxy.ClientError
	if _, err := b.Acquire(ctx, rt); !errors.As(err, &ce) || ce.Code != "3D000" || ce.Message != `parent branch "nosuch" does not exist` {
		t.Fatalf("missing parent: %v, want 3D000 naming the parent, as a single server says", err)
	}

	late := r.node("late", "10.0.0.9:1", time.Hour, 0)
	if _, err := late.InsertBranch(ctx, catalog.Branch{Source: "app", Name: "stale", State: catalog.Running}, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := late.Register(ctx, "late", "10.0.0.9:1", -time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := addrOf(t, b, "app@stale"); codeOf(err) != "57P03" {
		t.Fatalf("node past its lease: %v, want 57P03", err)
	}
	if _, err := r.cat.Janitor(ctx, 0); err != nil {
		t.Fatal(err)
	}
	_, err := addrOf(t, New(r.cat, nil), "app@stale") // a front that has not cached the route
	if !errors.Is(err, errs.ErrLost) || codeOf(err) != "57P03" {
		t.Fatalf("lost branch: %v", err)
	}
}

// TestRolesFromCatalog: a new branch's roles are its source's current seed's, a
// recorded branch's its own.
func TestRolesFromCatalog(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	b := New(r.cat, nil)
	set, err := b.Roles(ctx, route(t, "app@new"))
	if _, ok := set["alice"]; err != nil || len(set) != 1 || !ok {
		t.Fatalf("roles of a new branch: %v %v", set, err)
	}
	n1 := r.node("n1", "10.0.0.1:1", time.Hour, 0)
	if _, err := n1.InsertBranch(ctx, catalog.Branch{Source: "app", Name: "own", State: catalog.Running, Roles: `{"bob":{}}`}, "test"); err != nil {
		t.Fatal(err)
	}
	set, err = b.Roles(ctx, route(t, "app@own"))
	if _, ok := set["bob"]; err != nil || !ok {
		t.Fatalf("roles of a recorded branch: %v %v", set, err)
	}
}

// TestRolesBeforeSourcesNamed: a route that names no known source gets the error
// that lists the sources only after a login against the roles of every source's
// seed (roles.AfterLogin), as from the engine.
func TestRolesBeforeSourcesNamed(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	if err := r.cat.AddSource(ctx, catalog.Source{Name: "crm", Kind: "empty"}); err != nil {
		t.Fatal(err)
	}
	sd, err := r.cat.AddSeed(ctx, catalog.Seed{Source: "crm"})
	if err != nil {
		t.Fatal(err)
	}
	sd.State, sd.Databases, sd.Roles = catalog.SeedReady, []string{"crm"}, `{"alice":{"name":"alice","password":"crm"},"carol":{}}`
	if err := r.cat.UpdateSeed(ctx, sd); err != nil {
		t.Fatal(err)
	}
	b := New(r.cat, nil)
	for _, params := range []map[string]string{
		{"user": "alice", "database": "app@x", "options": "-c pgbranch.source=nope"},
		{"user": "alice", "database": "nowhere@x"},
	} {
		name := params["database"]
		rt, perr := router.Parse(params, "main")
		if perr != nil {
			t.Fatal(perr)
		}
		_, err := b.Roles(ctx, rt)
		var later *roles.AfterLogin
		if !errors.As(err, &later) || !router.NamesSources(later.Err) {
			t.Fatalf("%s: %v, want roles.AfterLogin of the resolution error", name, err)
		}
		if len(later.Set) != 2 || later.Set["alice"].Password == "crm" {
			t.Errorf("%s: roles %v, want alice of app (the first source by name) and carol of crm", name, later.Set)
		}
	}
}

// TestAwaitOwner: a branch whose node's lease ran out waits for the node to renew
// it (a restart), for a while, and is then routed to it.
func TestAwaitOwner(t *testing.T) {
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
	b.ownerWait = 10 * time.Second
	go func() {
		time.Sleep(300 * time.Millisecond)
		n.Heartbeat(ctx, "10.0.0.5:1", "", time.Hour, catalog.Load{})
	}()
	if addr, err := addrOf(t, b, "app@b1"); err != nil || addr != "10.0.0.5:1" {
		t.Fatalf("a branch whose node came back: %q %v", addr, err)
	}
}

// TestRecreateLost: a lost branch asked for as ephemeral, or with a reset, is made
// again on a live node from the seed (its lost row removed, the client told);
// asked for plainly it stays refused.
func TestRecreateLost(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	gone := r.node("gone", "10.0.0.8:1", time.Hour, 0)
	for _, name := range []string{"eph", "plain"} {
		if _, err := gone.InsertBranch(ctx, catalog.Branch{Source: "app", Name: name, State: catalog.Running}, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := gone.Register(ctx, "gone", "10.0.0.8:1", -time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := r.cat.Janitor(ctx, 0); err != nil {
		t.Fatal(err)
	}
	r.node("live", "10.0.0.9:1", time.Hour, 0)
	b := New(r.cat, nil)
	rt := route(t, "app@eph")
	rt.Options.Ephemeral = true
	l, err := b.Acquire(ctx, rt)
	if err != nil {
		t.Fatal(err)
	}
	nl, ok := l.(*noticeLease)
	if !ok || nl.addr != "10.0.0.9:1" || len(nl.Notices()) != 1 || !nl.RouteParamsHave("pgbranch.ephemeral") {
		t.Fatalf("lost ephemeral branch: %#v", l)
	}
	if got, _ := r.cat.RouteOf(ctx, "app", "eph"); got.Branch.ID != 0 {
		t.Fatalf("the lost row is still there: %+v", got.Branch)
	}
	if _, err := b.Acquire(ctx, route(t, "app@plain")); codeOf(err) != "57P03" {
		t.Fatalf("lost branch asked for plainly: %v, want 57P03", err)
	}
}

// TestRecreateLostChanged: a lost row that another process removed, and whose id
// a new branch of the name was given meanwhile (SQLite reuses a freed id), is not
// deleted by a recreate that read it lost: the new branch is kept and the client
// is asked to try again.
func TestRecreateLostChanged(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	gone := r.node("gone", "10.0.0.8:1", time.Hour, 0)
	if _, err := gone.InsertBranch(ctx, catalog.Branch{Source: "app", Name: "eph", State: catalog.Running}, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := gone.Register(ctx, "gone", "10.0.0.8:1", -time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := r.cat.Janitor(ctx, 0); err != nil {
		t.Fatal(err)
	}
	read, err := r.cat.RouteOf(ctx, "app", "eph")
	if err != nil || read.Branch.State != catalog.Lost {
		t.Fatalf("route of the lost branch: %+v, %v", read.Branch, err)
	}
	live := r.node("live", "10.0.0.9:1", time.Hour, 0)
	if err := live.DeleteBranch(ctx, read.Branch, "destroyed"); err != nil {
		t.Fatal(err)
	}
	id, err := live.InsertBranch(ctx, catalog.Branch{Source: "app", Name: "eph", State: catalog.Running}, "test")
	if err != nil || id != read.Branch.ID {
		t.Fatalf("the new branch got id %d (%v), want the freed id %d", id, err, read.Branch.ID)
	}
	b := New(r.cat, nil)
	if _, err := b.recreate(ctx, read.Branch, "app", "eph", router.Options{Ephemeral: true}, time.Now().Add(b.ownerWait)); codeOf(err) != "57P03" {
		t.Fatalf("recreate of a lost row that changed: %v, want 57P03", err)
	}
	if got, _ := r.cat.RouteOf(ctx, "app", "eph"); got.Branch.ID != id || got.Branch.State != catalog.Running {
		t.Fatalf("the new branch is %+v, want it kept", got.Branch)
	}
}

func (l *lease) RouteParamsHave(k string) bool { _, ok := l.RouteParams()[k]; return ok }

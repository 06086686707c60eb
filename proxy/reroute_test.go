package proxy_test

import (
	"context"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// reroutingBranches hands out leases to a server that refuses, which find the
// branch on another server (to) when asked, or nowhere when to is "".
type reroutingBranches struct {
	*fakeBranches
	to       string
	rerouted chan *fakeLease
}

type reroutingLease struct {
	*fakeLease
	rb *reroutingBranches
}

func (b *reroutingBranches) Acquire(ctx context.Context, r router.Route) (proxy.Lease, error) {
	l, err := b.fakeBranches.Acquire(ctx, r)
	if err != nil {
		return nil, err
	}
	return &reroutingLease{fakeLease: l.(*fakeLease), rb: b}, nil
}

func (l *reroutingLease) Reroute(context.Context) (proxy.Lease, error) {
	if l.rb.to == "" {
		return nil, nil
	}
	next := &fakeLease{addr: l.rb.to, released: make(chan struct{}), b: l.rb.fakeBranches}
	l.rb.rerouted <- next
	return next, nil
}

// TestReroute: a lease whose server refuses the session as unable to serve it
// now (57P03) and that finds the branch elsewhere (a front's new name that
// another node won) takes the client there, once; the first lease is released.
// One that finds nowhere else passes the refusal on, and so does a server's
// refusal of another kind.
func TestReroute(t *testing.T) {
	t.Parallel()
	loser := startFakeServer(t, scriptNotNow)
	winner := startFakeServer(t, scriptOK)
	rb := &reroutingBranches{fakeBranches: newFakeBranches(loser.addr(), nil), to: winner.addr(), rerouted: make(chan *fakeLease, 1)}
	p := startProxy(t, defaultConfig(), rb)
	c, err := p.connect(t, "dbname=app@new")
	if err != nil {
		t.Fatalf("a session placed on the node that lost the name: %v", err)
	}
	query(t, c)
	c.Close(context.Background())
	rb.lease(t, 0).waitReleased(t)
	recv(t, loser.startups, "the first node's startup")
	recv(t, winner.startups, "the winner's startup")
	recv(t, rb.rerouted, "the reroute").waitReleased(t)

	nowhere := &reroutingBranches{fakeBranches: newFakeBranches(loser.addr(), nil), rerouted: make(chan *fakeLease, 1)}
	p2 := startProxy(t, defaultConfig(), nowhere)
	_, err = p2.connect(t, "dbname=app@new")
	if pe := pgError(t, err); pe.Code != "57P03" {
		t.Fatalf("refused with nowhere else to go: %s, want the server's 57P03", pe.Code)
	}
	nowhere.lease(t, 0).waitReleased(t)

	denied := startFakeServer(t, scriptAuthError)
	other := &reroutingBranches{fakeBranches: newFakeBranches(denied.addr(), nil), to: winner.addr(), rerouted: make(chan *fakeLease, 1)}
	p3 := startProxy(t, defaultConfig(), other)
	_, err = p3.connect(t, "dbname=app@new")
	if pe := pgError(t, err); pe.Code != "28P01" {
		t.Fatalf("a refusal of another kind: %s, want the server's 28P01", pe.Code)
	}
	noneYet(t, other.rerouted, "a reroute after a 28P01")
}

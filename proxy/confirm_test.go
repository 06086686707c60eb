package proxy_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// confirmingBranches hand out leases whose Confirm refuses with err.
type confirmingBranches struct {
	*fakeBranches
	err  error
	took chan time.Duration
}

type confirmingLease struct {
	*fakeLease
	cb *confirmingBranches
}

func (b *confirmingBranches) Acquire(ctx context.Context, r router.Route) (proxy.Lease, error) {
	l, err := b.fakeBranches.Acquire(ctx, r)
	if err != nil {
		return nil, err
	}
	return &confirmingLease{fakeLease: l.(*fakeLease), cb: b}, nil
}

func (l *confirmingLease) Confirm(_ context.Context, took time.Duration) error {
	l.cb.took <- took
	return l.cb.err
}

// refusedByLostLease starts a fake server with script behind a proxy whose
// leases do not confirm (the branch was lost), and checks that a client is
// refused with the lease's 57P03 after one confirmation and that the lease is
// released.
func refusedByLostLease(t *testing.T, script string) (*fakeServer, *confirmingBranches, *testProxy) {
	t.Helper()
	fs := startFakeServer(t, script)
	cb := &confirmingBranches{fakeBranches: newFakeBranches(fs.addr(), nil), took: make(chan time.Duration, 2),
		err: &proxy.ClientError{Code: "57P03", Message: "the branch was on a lost node"}}
	p := startProxy(t, defaultConfig(), cb)
	_, err := p.connect(t, "dbname=app@b1")
	if pe := pgError(t, err); pe.Code != "57P03" || pe.Message != "the branch was on a lost node" {
		t.Fatalf("refused with %s %q, want the lease's 57P03", pe.Code, pe.Message)
	}
	recv(t, cb.took, "the confirmation")
	cb.lease(t, 0).waitReleased(t)
	return fs, cb, p
}

// TestConfirmRefuses: a lease that does not confirm its started session has
// its client refused with the lease's error, the lease released and the
// server session closed; one that confirms is served.
func TestConfirmRefuses(t *testing.T) {
	t.Parallel()
	fs, cb, p := refusedByLostLease(t, scriptOK)
	deadline := time.Now().Add(within)
	for fs.ended.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the refused session's server session was not closed")
		}
		time.Sleep(time.Millisecond)
	}

	cb.err = nil
	c := p.mustConnect(t, "dbname=app@b1")
	query(t, c)
	closeConn(t, c)
	recv(t, cb.took, "the second confirmation")
}

// TestConfirmFailedStart: a start-up its server refused is confirmed too, and a
// lease that no longer counts its branch as its node's tells the client why,
// instead of passing on what the node said.
func TestConfirmFailedStart(t *testing.T) {
	t.Parallel()
	_, cb, p := refusedByLostLease(t, scriptAuthError)

	cb.err = nil
	_, err := p.connect(t, "dbname=app@b1")
	if pe := pgError(t, err); pe.Code != "28P01" {
		t.Fatalf("refused with %s %q, want the server's own 28P01 once the lease confirms", pe.Code, pe.Message)
	}
	recv(t, cb.took, "the second confirmation")
}

package front

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// TestConfirm: a session whose start-up took longer than confirmAfter is
// refused with 57P03 when its branch was declared lost meanwhile, or is now
// another node's; a quick start-up, a branch still the node's, and a catalog
// that cannot be read refuse nothing.
func TestConfirm(t *testing.T) {
	r := newRig(t)
	b := New(r.cat, nil)
	reads := 0
	var route catalog.Route
	var readErr error
	b.ownerRead = func(context.Context, string, string) (catalog.Route, error) {
		reads++
		return route, readErr
	}
	l := b.lease(routeKey{"app", "b1"}, "n1", "10.0.0.5:1", router.Options{}, time.Now().Add(time.Minute))
	ctx := context.Background()
	code := func(err error) string {
		var ce *proxy.ClientError
		if errors.As(err, &ce) {
			return ce.Code
		}
		if err != nil {
			return err.Error()
		}
		return ""
	}

	route = catalog.Route{NodeID: "n1", Branch: catalog.Branch{ID: 7, State: catalog.Lost}}
	if err := l.Confirm(ctx, time.Second); err != nil || reads != 0 {
		t.Fatalf("a quick start-up: %v after %d reads, want no read", err, reads)
	}
	if got := code(l.Confirm(ctx, 3*time.Second)); got != "57P03" {
		t.Fatalf("a branch lost during a slow start-up: %q, want 57P03", got)
	}
	route.Branch.State, route.NodeID = catalog.Running, "n2"
	if got := code(l.Confirm(ctx, 3*time.Second)); got != "57P03" {
		t.Fatalf("a branch now another node's: %q, want 57P03", got)
	}
	route.NodeID = "n1"
	if err := l.Confirm(ctx, 3*time.Second); err != nil {
		t.Fatalf("a branch still the node's: %v", err)
	}
	readErr = catalog.ErrUnavailable
	if err := l.Confirm(ctx, 3*time.Second); err != nil {
		t.Fatalf("a catalog that cannot be read: %v, want the session to go on", err)
	}
}

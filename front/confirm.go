package front

import (
	"context"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
)

// confirmAfter is how long a session's start-up on its node may take before
// the front reads the branch's route again: longer than a node's heartbeat
// period, so that a start-up that began before the janitor declared the node
// dead and ended after it (a node frozen, then thawed, answering a connection
// kept from an earlier session before it learns its fate) is caught, while an
// ordinary start-up costs no catalog read.
const confirmAfter = 2 * time.Second

// Confirm checks, for a session whose start-up took took, that its branch is
// still its node's: a branch that was declared lost meanwhile, or that moved,
// is refused with 57P03 rather than served by an instance the catalog no
// longer counts. A catalog that cannot be read confirms nothing and refuses
// nothing: sessions to running branches go on through a catalog outage.
func (l *lease) Confirm(ctx context.Context, took time.Duration) error {
	if took < confirmAfter || l.confirm == nil {
		return nil
	}
	return l.confirm(ctx)
}

// confirm is the check of Confirm for k's branch, started on node.
func (b *Branches) confirm(ctx context.Context, k routeKey, node string) error {
	b.cache.forget(k)
	rctx, cancel := context.WithTimeout(ctx, catalogReadTimeout)
	rt, err := b.ownerRead(rctx, k.source, k.branch)
	cancel()
	switch {
	case err != nil:
		return nil
	case rt.Branch.State == catalog.Lost:
		return &proxy.ClientError{Code: codeCannotConnectNow, Message: "the branch was on a lost node",
			Hint: "its node was declared dead while the session started; destroy the branch (pgbranchproxy branch destroy) to use the name again"}
	case rt.Branch.ID != 0 && rt.NodeID != node:
		return &proxy.ClientError{Code: codeCannotConnectNow, Message: "the branch moved to another node while the session started",
			Hint: "try again"}
	}
	return nil
}

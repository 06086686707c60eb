package catalog_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// Pruning removes only what is older than the cut-off, in batches, from either log;
// the zero time keeps everything.
func TestPrune(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		addSources(t, c, "s")
		const old = 2500 // more than two batches
		for i := range old {
			if err := c.AppendAudit(ctx, catalog.AuditEntry{At: at(1), Actor: "local", Action: fmt.Sprintf("a%d", i), Result: "ok"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.AppendAudit(ctx, catalog.AuditEntry{At: at(3), Actor: "local", Action: "kept", Result: "ok"}); err != nil {
			t.Fatal(err)
		}
		if n, err := c.PruneAudit(ctx, time.Time{}); err != nil || n != 0 {
			t.Fatalf("PruneAudit(zero) = %d, %v; want 0", n, err)
		}
		if n, err := c.PruneAudit(ctx, at(2)); err != nil || n != old {
			t.Fatalf("PruneAudit = %d, %v; want %d", n, err, old)
		}
		left, err := c.Audit(ctx, time.Time{})
		if err != nil || len(left) != 1 || left[0].Action != "kept" {
			t.Fatalf("left %+v, %v", left, err)
		}

		before := time.Now()
		br := catalog.Branch{Source: "s", Name: "b", State: catalog.Creating, CreatedAt: time.Now()}
		if _, err := c.InsertBranch(ctx, br, "create"); err != nil {
			t.Fatal(err)
		}
		if n, err := c.PruneTransitions(ctx, before); err != nil || n != 0 {
			t.Fatalf("PruneTransitions(before the branch) = %d, %v; want 0", n, err)
		}
		if n, err := c.PruneTransitions(ctx, time.Now().Add(time.Second)); err != nil || n != 1 {
			t.Fatalf("PruneTransitions = %d, %v; want 1", n, err)
		}
		if log, err := c.Transitions(ctx, "s", "b"); err != nil || len(log) != 0 {
			t.Fatalf("transitions left %+v, %v", log, err)
		}
	})
}

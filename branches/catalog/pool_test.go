package catalog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

func TestClaimBranch(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		addSources(t, c, "a")
		member, err := c.InsertBranch(ctx, catalog.Branch{Source: "a", Name: "_pool-1", State: catalog.Running, Pooled: true}, "warm pool")
		if err != nil {
			t.Fatal(err)
		}
		taken, err := c.InsertBranch(ctx, catalog.Branch{Source: "a", Name: "taken", State: catalog.Running}, "")
		if err != nil {
			t.Fatal(err)
		}
		at := time.Unix(1000, 0).UTC()
		if err := c.ClaimBranch(ctx, member, catalog.Claim{Name: "taken", At: at}, "claim"); !errors.Is(err, catalog.ErrExists) {
			t.Fatalf("claim under a taken name = %v, want ErrExists", err)
		}
		if err := c.ClaimBranch(ctx, taken, catalog.Claim{Name: "x", At: at}, "claim"); !errors.Is(err, catalog.ErrNotFound) {
			t.Fatalf("claim of a branch that is not pooled = %v, want ErrNotFound", err)
		}
		cl := catalog.Claim{Name: "feature", TTL: time.Hour, Ephemeral: true, Quota: 1 << 20, At: at}
		if err := c.ClaimBranch(ctx, member, cl, "claim"); err != nil {
			t.Fatal(err)
		}
		if err := c.ClaimBranch(ctx, member, catalog.Claim{Name: "again", At: at}, "claim"); !errors.Is(err, catalog.ErrNotFound) {
			t.Fatalf("second claim = %v, want ErrNotFound: a member is claimed once", err)
		}
		all, err := c.Branches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got catalog.Branch
		for _, b := range all {
			if b.ID == member {
				got = b
			}
		}
		if got.Name != "feature" || got.Pooled || got.TTL != time.Hour || !got.Ephemeral || got.Quota != 1<<20 || !got.LastUsedAt.Equal(at) || !got.HadSession {
			t.Fatalf("claimed branch = %+v", got)
		}
		tr, err := c.Transitions(ctx, "a", "feature")
		if err != nil || len(tr) != 1 || tr[0].From != "pooled" {
			t.Fatalf("transitions of the claimed name = %+v %v, want one from pooled", tr, err)
		}
		if err := c.SetSourceWarm(ctx, "nosuch", 3); !errors.Is(err, catalog.ErrNotFound) {
			t.Fatalf("SetSourceWarm of a missing source = %v", err)
		}
	})
}

// TestMarkHadSession: a branch has had no session until MarkHadSession (or a
// claim) says so, and UpdateBranch, which writes every other field, keeps it.
func TestMarkHadSession(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		addSources(t, c, "a")
		id, err := c.InsertBranch(ctx, catalog.Branch{Source: "a", Name: "b", State: catalog.Running, Ephemeral: true, HadSession: true}, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := branchByID(t, c, id); got.HadSession {
			t.Fatalf("a new branch has had a session: %+v", got)
		}
		if err := c.MarkHadSession(ctx, id); err != nil {
			t.Fatal(err)
		}
		got := branchByID(t, c, id)
		got.HadSession, got.State = false, catalog.Stopped
		if err := c.UpdateBranch(ctx, got, "stop"); err != nil {
			t.Fatal(err)
		}
		if got := branchByID(t, c, id); !got.HadSession || got.State != catalog.Stopped {
			t.Fatalf("after MarkHadSession and an update: %+v, want HadSession kept", got)
		}
		if err := c.MarkHadSession(ctx, id+100); !errors.Is(err, catalog.ErrNotFound) {
			t.Fatalf("MarkHadSession of a missing branch = %v, want ErrNotFound", err)
		}
	})
}

func branchByID(t *testing.T, c *catalog.Catalog, id int64) catalog.Branch {
	t.Helper()
	all, err := c.Branches(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range all {
		if b.ID == id {
			return b
		}
	}
	t.Fatalf("no branch %d", id)
	return catalog.Branch{}
}

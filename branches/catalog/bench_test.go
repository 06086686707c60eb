package catalog_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// BenchmarkBranchLife is one branch's catalog writes from creation to its end on
// each backend: insert (creating), update (running), touch, delete; "fenced" with
// the catalog registered as a node, so that every write carries the fence.
func BenchmarkBranchLife(b *testing.B) {
	for _, bk := range backends {
		for _, fenced := range []bool{false, true} {
			name := bk.name
			if fenced {
				name += "_fenced"
			}
			b.Run(name, func(b *testing.B) { benchBranchLife(b, bk, fenced) })
		}
	}
}

func benchBranchLife(b *testing.B, bk backend, fenced bool) {
	ctx := context.Background()
	c, _ := bk.open(b)
	addSources(b, c, "a")
	if fenced {
		if _, err := c.Register(ctx, "n1", "", time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		br := catalog.Branch{Source: "a", Name: fmt.Sprintf("b%d", i), State: catalog.Creating, CreatedAt: time.Now()}
		id, err := c.InsertBranch(ctx, br, "create")
		if err != nil {
			b.Fatal(err)
		}
		br.ID, br.State = id, catalog.Running
		if err := c.UpdateBranch(ctx, br, "ready"); err != nil {
			b.Fatal(err)
		}
		if err := c.Touch(ctx, map[int64]time.Time{id: time.Now()}); err != nil {
			b.Fatal(err)
		}
		if err := c.DeleteBranch(ctx, br, "destroyed"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHeartbeat is one node's heartbeat on each backend.
func BenchmarkHeartbeat(b *testing.B) {
	for _, bk := range backends {
		b.Run(bk.name, func(b *testing.B) {
			ctx := context.Background()
			c, _ := bk.open(b)
			if _, err := c.Register(ctx, "n1", "", time.Minute); err != nil {
				b.Fatal(err)
			}
			load := catalog.Load{Running: 3, MaxRunning: 8, FreeBytes: 1 << 40}
			b.ResetTimer()
			for range b.N {
				if err := c.Heartbeat(ctx, "127.0.0.1:6432", "", time.Minute, load); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBranches lists 100 branches on each backend (what reconcile and
// branch ls read).
func BenchmarkBranches(b *testing.B) {
	for _, bk := range backends {
		b.Run(bk.name, func(b *testing.B) {
			ctx := context.Background()
			c, _ := bk.open(b)
			addSources(b, c, "a")
			for i := range 100 {
				if _, err := c.InsertBranch(ctx, fullBranch("a", fmt.Sprintf("b%d", i)), "create"); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				if _, err := c.Branches(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClaim is a warm pool member's claim by a connection on each backend,
// with the catalog registered as a node (every serve's is).
func BenchmarkClaim(b *testing.B) {
	for _, bk := range backends {
		b.Run(bk.name, func(b *testing.B) {
			ctx := context.Background()
			c, _ := bk.open(b)
			addSources(b, c, "a")
			if _, err := c.Register(ctx, "n1", "", time.Minute); err != nil {
				b.Fatal(err)
			}
			ids := make([]int64, b.N)
			for i := range b.N {
				br := catalog.Branch{Source: "a", Name: fmt.Sprintf("_pool-%d", i), State: catalog.Running, Pooled: true, CreatedAt: time.Now()}
				id, err := c.InsertBranch(ctx, br, "warm pool")
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = id
			}
			b.ResetTimer()
			for i, id := range ids {
				if err := c.ClaimBranch(ctx, id, catalog.Claim{Name: fmt.Sprintf("t%d", i), At: time.Now()}, "claimed by a connection"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// run calls fn(i) for i in [0, n) on n goroutines at once and returns their errors.
func run(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			errs[i] = fn(i)
		}()
	}
	start.Done()
	done.Wait()
	return errs
}

// Processes that open one catalog at once all succeed: creating the schema and
// adding columns is serialized (on Postgres, by a lock; on SQLite, by its one writer).
func TestConcurrentOpen(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		dsn := bk.newDSN(t)
		errs := run(6, func(int) error {
			c, err := catalog.Open(dsn)
			if err != nil {
				return err
			}
			return c.Close()
		})
		for _, err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})
}

// Claims racing for one pooled branch: exactly one wins, the others find it no
// longer pooled.
func TestConcurrentClaims(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		id, err := c.InsertBranch(ctx, catalog.Branch{Source: "a", Name: "_pool-1", State: catalog.Running, Pooled: true}, "warm pool")
		if err != nil {
			t.Fatal(err)
		}
		const n = 8
		errs := run(n, func(i int) error {
			return c.ClaimBranch(ctx, id, catalog.Claim{Name: fmt.Sprintf("claimer-%d", i), At: at(i)}, "claim")
		})
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, catalog.ErrNotFound):
				t.Errorf("a losing claim = %v, want ErrNotFound", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d claims won, want exactly 1", won)
		}
		got, err := c.Branches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Pooled {
			t.Errorf("after the race: %+v, want one claimed branch", got)
		}
	})
}

// Seeds added to one source at once get distinct, consecutive generations.
func TestConcurrentSeeds(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		const n = 8
		gens := make([]int, n)
		errs := run(n, func(i int) error {
			s, err := c.AddSeed(ctx, catalog.Seed{Source: "a", Dir: fmt.Sprintf("/seeds/%d", i)})
			gens[i] = s.Generation
			return err
		})
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		slices.Sort(gens)
		for i, g := range gens {
			if g != i+1 {
				t.Fatalf("generations %v, want 1..%d", gens, n)
			}
		}
	})
}

// Updates racing on one branch log a chain of transitions: each one is from the
// state the previous one left.
func TestConcurrentUpdates(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		b := catalog.Branch{Source: "a", Name: "f", State: catalog.Creating}
		id, err := c.InsertBranch(ctx, b, "create")
		if err != nil {
			t.Fatal(err)
		}
		b.ID = id
		const n = 8
		errs := run(n, func(i int) error {
			u := b
			u.State = catalog.State(fmt.Sprintf("s%d", i))
			return c.UpdateBranch(ctx, u, "race")
		})
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		tr, err := c.Transitions(ctx, "a", "f")
		if err != nil {
			t.Fatal(err)
		}
		if len(tr) != n+1 {
			t.Fatalf("%d transitions, want %d", len(tr), n+1)
		}
		for i := 1; i < len(tr); i++ {
			if tr[i].From != tr[i-1].To {
				t.Errorf("transition %d is from %q, but %d left %q", i, tr[i].From, i-1, tr[i-1].To)
			}
		}
	})
}

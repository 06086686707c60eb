package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

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
		addSources(t, c, "a")
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
		addSources(t, c, "a")
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

// handles returns n handles on the catalog at dsn for n processes racing: on
// Postgres a catalog of their own each; a SQLite catalog is one process's, so c.
func handles(t *testing.T, bk backend, c *catalog.Catalog, dsn string, n int) []*catalog.Catalog {
	t.Helper()
	hs := make([]*catalog.Catalog, n)
	for i := range hs {
		hs[i] = c
		if bk.name == "postgres" {
			hs[i] = openAgain(t, dsn)
		}
	}
	return hs
}

// Nodes registering at once get distinct slots, the lowest free ones.
func TestConcurrentRegister(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, dsn := bk.open(t)
		hs := handles(t, bk, c, dsn, 8)
		slots := make([]int, 8)
		for _, err := range run(8, func(i int) error {
			n, err := hs[i].Register(ctx, fmt.Sprintf("n%d", i), "", time.Minute)
			slots[i] = n.Slot
			return err
		}) {
			if err != nil {
				t.Fatal(err)
			}
		}
		slices.Sort(slots)
		if want := []int{1, 2, 3, 4, 5, 6, 7, 8}; !slices.Equal(slots, want) {
			t.Fatalf("slots %v, want %v", slots, want)
		}
	})
}

// Janitors sweeping at once declare an expired node dead once, and its branch
// lost once.
func TestConcurrentJanitors(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, dsn := bk.open(t)
		addSources(t, c, "a")
		gone := openAgain(t, dsn)
		if _, err := gone.Register(ctx, "gone", "", -time.Hour); err != nil {
			t.Fatal(err)
		}
		if _, err := gone.InsertBranch(ctx, catalog.Branch{Source: "a", Name: "x", State: catalog.Running}, "create"); err != nil {
			t.Fatal(err)
		}
		hs := handles(t, bk, c, dsn, 8)
		for _, h := range hs {
			catalog.TestSetAnswering(h, time.Hour)
		}
		swept := make([]catalog.Swept, 8)
		for _, err := range run(8, func(i int) (err error) {
			swept[i], err = hs[i].Janitor(ctx, time.Minute)
			return err
		}) {
			if err != nil {
				t.Fatal(err)
			}
		}
		dead, lost := 0, 0
		for _, s := range swept {
			dead, lost = dead+len(s.Dead), lost+s.Lost
		}
		tr, err := c.Transitions(ctx, "a", "x")
		if err != nil {
			t.Fatal(err)
		}
		if dead != 1 || lost != 1 || len(tr) != 2 {
			t.Fatalf("janitors declared %d nodes dead and %d branches lost, with %d transitions (%+v); want 1, 1 and create+lost", dead, lost, len(tr), tr)
		}
	})
}

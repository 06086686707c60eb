package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// dbName is the database of the seed, and the source's name.
const dbName = "chbench"

// result is what one workflow's run measured. Latencies are milliseconds, keyed by
// the depth of the branch they were measured on.
type result struct {
	W          workflow
	Completed  int
	Failed     int
	Errors     []string // the first few failures
	Wall       time.Duration
	Fork       map[int][]float64
	Eval       map[int][]float64
	Destroy    map[int][]float64
	Cold       []float64 // new branches from the seed, created alongside the steps
	StepMS     float64   // step time summed over workers
	ManageMS   float64   // fork and destroy time summed over workers
	MaxDepth   int
	PeakLive   int
	Overflow   int // forks that fell back to the root after the tree filled
	Cross      []crossRun
	PeakRun    int   // branch servers running at once, sampled
	PeakOwned  int64 // bytes branches owned, sampled
	PeakDisk   int64 // bytes allocated under the state directory, seeds excluded, sampled
	LiveAtEnd  int
	mu         sync.Mutex
	stepsTaken atomic.Int64
}

// crossRun is one cross-branch query: the sum of every live branch's answer.
type crossRun struct {
	Branches int
	Failed   int
	Took     time.Duration
}

func newResult(w workflow) *result {
	return &result{W: w, Fork: map[int][]float64{}, Eval: map[int][]float64{}, Destroy: map[int][]float64{}}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (r *result) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Failed++
	if len(r.Errors) < 5 {
		r.Errors = append(r.Errors, err.Error())
	}
}

// runner runs one workflow against a proxy.
type runner struct {
	cfg   config
	p     *proxy
	w     workflow
	t     *tree
	r     *result
	cold  atomic.Int64
	coldN int // a cold create every coldN steps
}

// runWorkflow runs every worker-step of w with cfg.concurrency clients at once, then
// the cross-branch queries, and returns what it measured. The caller removes the
// branches it leaves.
func runWorkflow(ctx context.Context, cfg config, p *proxy, w workflow) (*result, *tree, error) {
	root := w.Short + "-root"
	rn := &runner{cfg: cfg, p: p, w: w, t: newTree(w, root), r: newResult(w), coldN: max(4, w.steps()/15)}
	// The root is a branch of the seed, stopped like any idle branch once forked.
	c, err := pgx.Connect(ctx, p.dsn(dbName, root, ""))
	if err != nil {
		return nil, nil, fmt.Errorf("create root %s: %w", root, err)
	}
	c.Close(ctx)
	stopSampler := startSampler(ctx, p, rn.r, cfg.sampleEvery)
	start := time.Now()
	workers := make(chan int)
	var wg sync.WaitGroup
	for range min(cfg.concurrency, w.T) {
		wg.Go(func() {
			for id := range workers {
				rn.worker(ctx, id)
			}
		})
	}
	for id := range w.T {
		select {
		case workers <- id:
		case <-ctx.Done():
		}
	}
	close(workers)
	wg.Wait()
	for range w.C {
		rn.r.Cross = append(rn.r.Cross, rn.crossQuery(ctx))
	}
	rn.r.Wall = time.Since(start)
	stopSampler()
	rn.r.PeakLive, rn.r.Overflow = rn.t.peakLive, rn.t.overflow
	rn.r.LiveAtEnd = len(rn.t.liveNames()) - 1
	return rn.r, rn.t, ctx.Err()
}

// worker runs the S steps of worker id.
func (rn *runner) worker(ctx context.Context, id int) {
	rng := rand.New(rand.NewPCG(uint64(len(rn.w.Name)), uint64(id)))
	var cur *node
	for s := range rn.w.S {
		if ctx.Err() != nil {
			return
		}
		n := rn.r.stepsTaken.Add(1)
		if n%int64(rn.coldN) == 1 {
			rn.coldCreate(ctx)
		}
		name := fmt.Sprintf("%s-%d-%d", rn.w.Short, id, s)
		child, err := rn.step(ctx, rng, cur, name)
		if err != nil {
			rn.r.fail(fmt.Errorf("%s: %w", name, err))
			continue
		}
		cur = child
	}
}

// step forks a child of the chosen parent through the proxy, mutates and evaluates
// it, and prunes it with probability γ.
func (rn *runner) step(ctx context.Context, rng *rand.Rand, cur *node, name string) (*node, error) {
	parent := rn.t.pick(cur, rng)
	child := rn.t.add(name, parent)
	start := time.Now()
	conn, err := pgx.Connect(ctx, rn.p.dsn(dbName, name, "-c pgbranch.from="+parent.name))
	fork := time.Since(start)
	if err != nil {
		rn.t.drop(child)
		return nil, fmt.Errorf("fork from %s: %w", parent.name, err)
	}
	evals, err := rn.work(ctx, conn, rng, name)
	conn.Close(context.WithoutCancel(ctx))
	if err != nil {
		rn.t.finish(child, false)
		return child, err
	}
	pruned := rng.Float64() < rn.w.Gamma
	var destroy time.Duration
	if pruned {
		t := time.Now()
		if err := rn.p.destroy(ctx, name); err != nil {
			rn.t.finish(child, false)
			return child, err
		}
		destroy = time.Since(t)
	}
	rn.t.finish(child, pruned)
	total := time.Since(start)
	r := rn.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Completed++
	d := child.depth
	r.MaxDepth = max(r.MaxDepth, d)
	r.Fork[d] = append(r.Fork[d], ms(fork))
	r.Eval[d] = append(r.Eval[d], evals...)
	if pruned {
		r.Destroy[d] = append(r.Destroy[d], ms(destroy))
	}
	r.StepMS += ms(total)
	r.ManageMS += ms(fork + destroy)
	return child, nil
}

// work runs the step's schema changes, data mutations and eval queries on conn and
// returns the eval latencies.
func (rn *runner) work(ctx context.Context, conn *pgx.Conn, rng *rand.Rand, name string) ([]float64, error) {
	if _, err := conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		return nil, err
	}
	tag := strings.ReplaceAll(name, "-", "_")
	for k := range rn.w.Ms {
		if _, err := conn.Exec(ctx, schemaChange(k, tag)); err != nil {
			return nil, fmt.Errorf("schema change %d: %w", k, err)
		}
	}
	for k := range rn.w.Md {
		if _, err := conn.Exec(ctx, mutation(rng, rn.cfg.scale)); err != nil {
			return nil, fmt.Errorf("mutation %d: %w", k, err)
		}
	}
	var evals []float64
	for k := range rn.w.Qv {
		t := time.Now()
		rows, err := conn.Query(ctx, evalQueries[k%len(evalQueries)])
		if err != nil {
			return nil, err
		}
		for rows.Next() {
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("eval query %d: %w", k, err)
		}
		evals = append(evals, ms(time.Since(t)))
	}
	return evals, nil
}

// coldCreate times a new branch of the seed (no parent) under the same load, for
// comparison with the forks, and destroys it again.
func (rn *runner) coldCreate(ctx context.Context) {
	name := fmt.Sprintf("%s-cold-%d", rn.w.Short, rn.cold.Add(1))
	start := time.Now()
	conn, err := pgx.Connect(ctx, rn.p.dsn(dbName, name, ""))
	took := time.Since(start)
	if err != nil {
		rn.r.fail(fmt.Errorf("cold create %s: %w", name, err))
		return
	}
	conn.Close(context.WithoutCancel(ctx))
	rn.r.mu.Lock()
	rn.r.Cold = append(rn.r.Cold, ms(took))
	rn.r.mu.Unlock()
	if err := rn.p.destroy(ctx, name); err != nil {
		rn.r.fail(err)
	}
}

// crossQuery asks every live branch the cross-branch query, concurrency at a time,
// and totals the answers in the driver.
func (rn *runner) crossQuery(ctx context.Context) crossRun {
	names := rn.t.liveNames()
	start := time.Now()
	var failed atomic.Int64
	var mu sync.Mutex
	total := 0.0
	todo := make(chan string)
	var wg sync.WaitGroup
	for range min(rn.cfg.concurrency, len(names)) {
		wg.Go(func() {
			for name := range todo {
				conn, err := pgx.Connect(ctx, rn.p.dsn(dbName, name, ""))
				if err != nil {
					failed.Add(1)
					rn.r.fail(fmt.Errorf("cross-branch query on %s: %w", name, err))
					continue
				}
				var v float64
				err = conn.QueryRow(ctx, crossQuery).Scan(&v)
				conn.Close(context.WithoutCancel(ctx))
				if err != nil {
					failed.Add(1)
					rn.r.fail(fmt.Errorf("cross-branch query on %s: %w", name, err))
					continue
				}
				mu.Lock()
				total += v
				mu.Unlock()
			}
		})
	}
	for _, n := range names {
		todo <- n
	}
	close(todo)
	wg.Wait()
	return crossRun{Branches: len(names), Failed: int(failed.Load()), Took: time.Since(start)}
}

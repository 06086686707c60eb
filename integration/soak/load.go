package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// client is one identity with its own rows in one branch. Only one session of a
// client runs at a time (mu); n is how many rows it has committed (seq 1..n).
type client struct {
	id     int
	branch int
	mu     sync.Mutex
	n      int
}

// load drives the sessions, resets and ephemeral branches.
type load struct {
	c       config
	sys     *system
	clients []*client
	gates   []sync.RWMutex // per branch: sessions share it, a reset takes it alone
	start   time.Time

	sessions, rowsWritten, rowsChecked, resets, ephemerals atomic.Int64
	mu                                                     sync.Mutex
	errs                                                   []string
	errCount                                               int
}

func newLoad(c config, sys *system) *load {
	l := &load{c: c, sys: sys, gates: make([]sync.RWMutex, c.branches)}
	for i := range c.clients {
		l.clients = append(l.clients, &client{id: i + 1, branch: i % c.branches})
	}
	return l
}

func branchName(i int) string { return fmt.Sprintf("b%02d", i) }

// fail records an error no client provoked.
func (l *load) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errCount++
	if len(l.errs) < 30 {
		l.errs = append(l.errs, fmt.Sprintf("%s: ", time.Since(l.start).Round(time.Millisecond))+fmt.Sprintf(format, args...))
	}
}

// warm creates every branch with one session each, before the clock starts, so that
// creations (the first third's growth) are not taken for a leak.
func (l *load) warm(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make(chan error, l.c.branches)
	sem := make(chan struct{}, l.c.workers)
	for b := range l.c.branches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			conn, err := pgx.Connect(ctx, l.sys.dsn(branchName(b)))
			if err != nil {
				errs <- fmt.Errorf("create %s: %w", branchName(b), err)
				return
			}
			defer conn.Close(context.Background())
			var n int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM rows`).Scan(&n); err != nil || n != 0 {
				errs <- fmt.Errorf("new branch %s: %d rows, %v", branchName(b), n, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// run drives the load until ctx ends, then waits for every session to finish.
func (l *load) run(ctx context.Context) {
	l.start = time.Now()
	var wg sync.WaitGroup
	for range l.c.workers {
		wg.Add(1)
		go func() { defer wg.Done(); l.worker(ctx) }()
	}
	wg.Add(2)
	go func() { defer wg.Done(); l.resetter(ctx) }()
	go func() { defer wg.Done(); l.ephemeral(ctx) }()
	wg.Wait()
}

// cold reports whether branch b is in the fifth of the branches left unused now:
// the fifths take turns every 4 idle-stop periods, so each is stopped by the reaper
// and woken by the next session.
func (l *load) cold(b int) bool {
	period := 4 * l.c.idleStop
	turn := int(time.Since(l.start) / period)
	return b%5 == turn%5
}

func (l *load) worker(ctx context.Context) {
	for ctx.Err() == nil {
		c := l.clients[rand.IntN(len(l.clients))]
		if l.cold(c.branch) || !c.mu.TryLock() {
			continue
		}
		l.session(ctx, c)
		c.mu.Unlock()
	}
}

// session is one client session: check every row the client committed, add a few,
// check again.
func (l *load) session(ctx context.Context, c *client) {
	gate := &l.gates[c.branch]
	gate.RLock()
	defer gate.RUnlock()
	// The session itself is not cut short by the end of the run: a cancelled query
	// would be an error the client provoked.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	name := branchName(c.branch)
	conn, err := pgx.Connect(sctx, l.sys.dsn(name))
	if err != nil {
		l.fail("client %d: connect to %s: %v", c.id, name, err)
		return
	}
	defer conn.Close(context.Background())
	l.sessions.Add(1)
	if !l.check(sctx, conn, c, name) {
		return
	}
	k := 1 + rand.IntN(3)
	if _, err := conn.Exec(sctx, `INSERT INTO rows SELECT $1, g, md5(g::text) FROM generate_series($2::int, $3::int) g`, c.id, c.n+1, c.n+k); err != nil {
		l.fail("client %d on %s: insert: %v", c.id, name, err)
		return
	}
	c.n += k
	l.rowsWritten.Add(int64(k))
	l.check(sctx, conn, c, name)
}

// check compares the client's rows with what it committed: rows 1..n, nothing lost,
// nothing extra.
func (l *load) check(ctx context.Context, conn *pgx.Conn, c *client, name string) bool {
	var n, maxSeq, sum int64
	err := conn.QueryRow(ctx, `SELECT count(*), coalesce(max(seq), 0), coalesce(sum(seq), 0) FROM rows WHERE client = $1`, c.id).Scan(&n, &maxSeq, &sum)
	if err != nil {
		l.fail("client %d on %s: read its rows: %v", c.id, name, err)
		return false
	}
	want := int64(c.n)
	if n != want || maxSeq != want || sum != want*(want+1)/2 {
		l.fail("client %d on %s: LOST OR EXTRA WRITES: %d rows (max seq %d), committed %d", c.id, name, n, maxSeq, want)
		return false
	}
	l.rowsChecked.Add(n)
	return true
}

// resetter resets a random branch every resetEvery, with no session of ours on it,
// and clears its clients' expectations.
func (l *load) resetter(ctx context.Context) {
	t := time.NewTicker(l.c.resetEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b := rand.IntN(l.c.branches)
		gate := &l.gates[b]
		gate.Lock()
		// Not cancelled by the end of the run: a reset cut short on our side may
		// still happen on serve's, and the clients must know.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		err := l.reset(rctx, branchName(b))
		cancel()
		if err == nil {
			for _, c := range l.clients {
				if c.branch == b {
					c.n = 0 // ordered by gate with every session of c
				}
			}
			l.resets.Add(1)
		} else {
			l.fail("reset %s: %v", branchName(b), err)
		}
		gate.Unlock()
	}
}

// reset resets a branch; a branch not yet created is left alone. A lease released a
// moment after its client hung up can still be counted (409): retried briefly.
func (l *load) reset(ctx context.Context, name string) error {
	for i := 0; ; i++ {
		err := l.sys.reset(ctx, name)
		var ae *apiError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ae) && ae.status == http.StatusNotFound:
			return nil
		case errors.As(err, &ae) && ae.status == http.StatusConflict && i < 50:
			time.Sleep(100 * time.Millisecond)
		default:
			return err
		}
	}
}

// ephemeral makes an ephemeral branch every ephEvery: one session writes and reads
// rows in it; the branch must be gone soon after (checked after the load).
func (l *load) ephemeral(ctx context.Context) {
	t := time.NewTicker(l.c.ephEvery)
	defer t.Stop()
	for i := 1; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		name := fmt.Sprintf("eph-%d", i)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		conn, err := pgx.Connect(sctx, l.sys.dsn(name, "options='-c pgbranch.ephemeral=on'"))
		if err != nil {
			l.fail("ephemeral %s: connect: %v", name, err)
			cancel()
			continue
		}
		var n int
		_, err = conn.Exec(sctx, `INSERT INTO rows SELECT 0, g, '' FROM generate_series(1, 100) g`)
		if err == nil {
			err = conn.QueryRow(sctx, `SELECT count(*) FROM rows`).Scan(&n)
		}
		if err != nil || n != 100 {
			l.fail("ephemeral %s: %d rows, %v", name, n, err)
		}
		conn.Close(context.Background())
		cancel()
		l.ephemerals.Add(1)
	}
}

// problems lists the errors the clients saw.
func (l *load) problems() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]string(nil), l.errs...)
	if l.errCount > len(l.errs) {
		out = append(out, fmt.Sprintf("... %d errors in all", l.errCount))
	}
	return out
}

// summary prints what the load did, the lifecycle actions each node counted and,
// with fronts, the sessions each took and refused.
func (l *load) summary(w io.Writer) {
	fmt.Fprintf(w, "soak: %d sessions, %d rows written, %d rows checked, %d resets, %d ephemeral branches, %d errors\n",
		l.sessions.Load(), l.rowsWritten.Load(), l.rowsChecked.Load(), l.resets.Load(), l.ephemerals.Load(), l.errCount)
	const actions = "pgbranch_branch_actions_total"
	for _, n := range l.sys.nodes {
		m, err := promValues("http://"+n.metrics+"/metrics", actions)
		if err != nil {
			fmt.Fprintf(w, "soak: %s's metrics: %v\n", n.name, err)
			continue
		}
		var keys []string
		for k := range m {
			if strings.HasPrefix(k, actions+"{") {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			prefix := ""
			if len(l.sys.nodes) > 1 {
				prefix = n.name + " "
			}
			fmt.Fprintf(w, "soak: %s%s %.0f\n", prefix, k, m[k])
		}
	}
	if l.sys.pg == nil {
		return
	}
	for _, f := range l.sys.fronts {
		m, err := promValues("http://"+f.metrics+"/metrics", "pgbranch_proxy_connections_total", "pgbranch_proxy_refused_total")
		if err != nil {
			fmt.Fprintf(w, "soak: %s's metrics: %v\n", f.name, err)
			continue
		}
		fmt.Fprintf(w, "soak: %s took %.0f connections, refused %.0f\n", f.name, m["pgbranch_proxy_connections_total"], m["pgbranch_proxy_refused_total"])
	}
}

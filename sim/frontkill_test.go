package sim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// session is a client's open session through one front, reading in a loop.
type session struct {
	front  *member
	conn   *pgx.Conn
	reads  int       // successful reads after the kill
	err    error     // what ended it
	failAt time.Time // when
}

// testFrontKillMidSession opens two sessions through each front on one branch,
// each reading every 20 ms, and kills the first front with SIGKILL. The sessions
// through the other fronts must go on without an error; those through the
// killed front end, and their clients reconnect through another front. Once all
// are closed the node must count no session on the branch (the killed front's
// sessions ended on the node too), and the front, started again, serves.
func testFrontKillMidSession(t *testing.T, ctx context.Context, c *cluster, branch string) {
	victim := c.fronts[0]
	var sessions []*session
	for _, f := range c.fronts {
		for range 2 {
			conn, err := c.connect(ctx, f, "app@"+branch)
			if err != nil {
				t.Fatalf("session through %s: %v", f.name, err)
			}
			sessions = append(sessions, &session{front: f, conn: conn})
		}
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		killed time.Time
		stop   = make(chan struct{})
	)
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var v string
				err := s.conn.QueryRow(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v)
				if err == nil && v != branch {
					err = fmt.Errorf("read %q, want %q", v, branch)
				}
				mu.Lock()
				switch {
				case err != nil:
					s.err, s.failAt = err, time.Now()
				case !killed.IsZero():
					s.reads++
				}
				mu.Unlock()
				if err != nil {
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	killed = time.Now()
	mu.Unlock()
	victim.kill9()
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()

	var ended []time.Duration
	for _, s := range sessions {
		if s.front == victim {
			if s.err == nil {
				t.Errorf("a session through the killed %s still read after it died", victim.name)
				continue
			}
			ended = append(ended, s.failAt.Sub(killed))
			if v, err := c.read(ctx, c.fronts[1], branch); err != nil || v != branch {
				t.Errorf("reconnect through %s: %q %v", c.fronts[1].name, v, err)
			}
			continue
		}
		if s.err != nil {
			t.Errorf("a session through %s failed at %s after %s was killed: %v", s.front.name, s.failAt.Sub(killed).Round(time.Millisecond), victim.name, s.err)
		} else if s.reads == 0 {
			t.Errorf("a session through %s read nothing after %s was killed", s.front.name, victim.name)
		}
	}
	for _, s := range sessions {
		s.conn.Close(ctx)
	}
	row, _ := c.cat.branch(t, branch)
	node := c.nodeByID(t, row.node)
	drained := eventually(t, 20*time.Second, "no session left on "+node.name+" for "+branch, func() bool {
		return node.branches(t)[branch].Sessions == 0
	})
	victim.start(t)
	if v, err := c.read(ctx, victim, branch); err != nil || v != branch {
		t.Fatalf("through %s started again: %q %v", victim.name, v, err)
	}
	t.Logf("front killed mid-session: %s's sessions ended %v after the kill and reconnected through %s; %d sessions through the other fronts read on; %s counted no session %s after all were closed",
		victim.name, roundAll(ended), c.fronts[1].name, len(sessions)-len(ended), node.name, drained.Round(time.Millisecond))
}

// testFrontKillDuringCreate is what applies of the design's M5 (a front killed
// at each failpoint of its claim) now that nodes, not fronts, write the branch's
// row: a client's first session on a new name goes through one front, which is
// killed with SIGKILL as soon as the catalog holds the row the node inserted
// (state creating, the node mounting and starting the server). The node must
// finish the creation (detached from the session that asked for it), and a retry
// through another front must be served that branch: one row, one creation, one
// postmaster.
func testFrontKillDuringCreate(t *testing.T, ctx context.Context, c *cluster, reps int) {
	for rep := range reps {
		victim, retry := c.fronts[rep%len(c.fronts)], c.fronts[(rep+1)%len(c.fronts)]
		name := fmt.Sprintf("m5-%d", rep)
		before := 0
		for _, n := range c.nodes {
			before += n.creates(t)
		}
		errc := make(chan error, 1)
		go func() {
			_, err := c.read(ctx, victim, name)
			errc <- err
		}()
		var state string
		deadline := time.Now().Add(30 * time.Second)
		for {
			row, ok := c.cat.branch(t, name)
			if ok {
				state = row.state
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no row within 30s of the first connect%s", name, c.logs())
			}
			time.Sleep(2 * time.Millisecond)
		}
		killed := time.Now()
		victim.kill9()
		clientErr := <-errc
		if state != "creating" {
			t.Errorf("%s: the row was %s when %s was killed, want creating (the kill came too late to test anything)", name, state, victim.name)
		}
		v, err := c.read(ctx, retry, name)
		if err != nil || v != "seed" {
			t.Fatalf("%s: retry through %s: %q %v%s", name, retry.name, v, err, c.logs())
		}
		retried := time.Since(killed)
		after := 0
		for _, n := range c.nodes {
			after += n.creates(t)
		}
		row, _ := c.cat.branch(t, name)
		creations := c.cat.count(t, "SELECT count(*) FROM transitions WHERE source = 'app' AND branch = $1 AND from_state = ''", name)
		in, err := instances(c.dir)
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, i := range in {
			if i.branch == row.id {
				running++
			}
		}
		if creations != 1 || after-before != 1 || running != 1 || row.state != "running" {
			t.Errorf("%s: %d creations in the catalog, %d counted by the nodes, %d postmasters, row %s; want 1, 1, 1, running",
				name, creations, after-before, running, row.state)
		}
		victim.start(t)
		t.Logf("M5 (what applies): %s killed while %s's row was %s on %s; its client got %v; the retry through %s was served %s after the kill; one creation",
			victim.name, name, state, row.node, clientErr, retry.name, retried.Round(time.Millisecond))
	}
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

package sim

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

// M12's size: cancelSessions sessions in batches of cancelBatch, each batch on
// one branch (a branch server takes about 100 connections), the batches taking
// turns on the nodes.
const (
	cancelSessions = 100
	cancelBatch    = 50
	sleepSQL       = "SELECT pg_sleep(30)"
)

// sleeper is one session of M12 running sleepSQL.
type sleeper struct {
	conn   *pgx.Conn
	pid    uint32 // the key of its BackendKeyData
	secret []byte
	done   chan struct{} // closed when the query has returned
	err    error
	ended  time.Time
}

// testCancelElsewhere is M12: cancelSessions sessions opened through the first
// front each run sleepSQL, and each is sent a CancelRequest through one of the
// other fronts (a front that did not issue the key passes it to every live
// node), first with its key's secret altered, which must cancel nothing, then
// with the key the client was given, which must end its query with 57014. It
// reports the latency of the cancels: from the request's dial to the client's
// error.
func testCancelElsewhere(t *testing.T, ctx context.Context, c *cluster, on map[string][]string) {
	var lat []time.Duration
	for b := range cancelSessions / cancelBatch {
		node := c.nodes[b%len(c.nodes)]
		lat = append(lat, cancelBatchOn(t, ctx, c, on[node.name][0], node)...)
	}
	t.Logf("M12 summary: %d of %d sessions opened through %s cancelled with 57014 by a request to %s or %s; cancel latency p50 %s p95 %s max %s; as many requests with a wrong secret cancelled none",
		len(lat), cancelSessions, c.fronts[0].name, c.fronts[1].name, c.fronts[2].name, percentile(lat, 50).Round(time.Millisecond),
		percentile(lat, 95).Round(time.Millisecond), percentile(lat, 100).Round(time.Millisecond))
}

// cancelBatchOn runs one batch of M12 on branch, which node holds, and returns
// the latencies of its cancels.
func cancelBatchOn(t *testing.T, ctx context.Context, c *cluster, branch string, node *member) []time.Duration {
	watch, err := c.connect(ctx, c.fronts[1], "app@"+branch)
	if err != nil {
		t.Fatalf("watcher on %s: %v", branch, err)
	}
	defer watch.Close(context.Background())
	sleeping := func() int {
		var n int
		err := watch.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND state = 'active'", sleepSQL).Scan(&n)
		if err != nil {
			t.Fatalf("watcher on %s: %v", branch, err)
		}
		return n
	}
	ss := openSleepers(t, ctx, c, branch)
	defer func() {
		for _, s := range ss {
			s.conn.Close(context.Background())
		}
	}()
	eventually(t, 30*time.Second, fmt.Sprintf("%d sleeps to run on %s", len(ss), branch), func() bool { return sleeping() == len(ss) })

	for i, s := range ss {
		wrong := append([]byte(nil), s.secret...)
		wrong[0] ^= 0xff
		if err := sendCancel(ctx, c.fronts[1+i%2], s.pid, wrong); err != nil {
			t.Fatalf("cancel with a wrong secret: %v", err)
		}
	}
	// Postgres acts on a cancel as soon as its backend gets the signal; give the
	// requests passed on (if any was) time to show before looking.
	time.Sleep(500 * time.Millisecond)
	for _, s := range ss {
		select {
		case <-s.done:
			t.Fatalf("a session's query returned after cancels with a wrong secret only: %v", s.err)
		default:
		}
	}
	if n := sleeping(); n != len(ss) {
		t.Fatalf("%d of %d sleeps run after cancels with a wrong secret, want all", n, len(ss))
	}

	var lat []time.Duration
	for i, s := range ss {
		sent := time.Now()
		if err := sendCancel(ctx, c.fronts[1+i%2], s.pid, s.secret); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
			t.Fatalf("session %d on %s: not cancelled within 20s of a cancel through %s%s", i, branch, c.fronts[1+i%2].name, c.logs())
		}
		if code := sqlstate(s.err); code != "57014" {
			t.Errorf("session %d on %s cancelled through %s: %v, want 57014", i, branch, c.fronts[1+i%2].name, s.err)
			continue
		}
		lat = append(lat, s.ended.Sub(sent))
	}
	t.Logf("M12 %s on %s: %d sessions through %s, %d cancelled with 57014 through %s and %s, latency p50 %s p95 %s max %s; %d cancels with a wrong secret before cancelled none",
		branch, node.name, len(ss), c.fronts[0].name, len(lat), c.fronts[1].name, c.fronts[2].name,
		percentile(lat, 50).Round(time.Millisecond), percentile(lat, 95).Round(time.Millisecond),
		percentile(lat, 100).Round(time.Millisecond), len(ss))
	return lat
}

// openSleepers opens cancelBatch sessions on branch through the first front, at
// once, and starts sleepSQL on each (bounded by a minute).
func openSleepers(t *testing.T, ctx context.Context, c *cluster, branch string) []*sleeper {
	t.Helper()
	ss := make([]*sleeper, cancelBatch)
	errs := make([]error, cancelBatch)
	var wg sync.WaitGroup
	for i := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := c.connect(ctx, c.fronts[0], "app@"+branch)
			if err != nil {
				errs[i] = err
				return
			}
			ss[i] = &sleeper{conn: conn, pid: conn.PgConn().PID(), secret: conn.PgConn().SecretKey(), done: make(chan struct{})}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			for _, s := range ss {
				if s != nil {
					s.conn.Close(context.Background())
				}
			}
			t.Fatalf("session %d on %s through %s: %v", i, branch, c.fronts[0].name, err)
		}
	}
	for _, s := range ss {
		go func() {
			qctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			_, s.err = s.conn.Exec(qctx, sleepSQL)
			s.ended = time.Now()
			close(s.done)
		}()
	}
	return ss
}

// sendCancel sends a CancelRequest for the key (pid, secret) to front f from the
// client host, and waits until the front has closed the connection, which it
// does once it has passed the request on.
func sendCancel(ctx context.Context, f *member, pid uint32, secret []byte) error {
	msg, err := (&pgproto3.CancelRequest{ProcessID: pid, SecretKey: secret}).Encode(nil)
	if err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	conn, err := f.dialer(dctx, "tcp", f.addr)
	if err != nil {
		return fmt.Errorf("dial %s: %w", f.name, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Write(msg); err != nil {
		return fmt.Errorf("send to %s: %w", f.name, err)
	}
	if _, err := io.Copy(io.Discard, conn); err != nil {
		return fmt.Errorf("waiting for %s to close the cancel connection: %w", f.name, err)
	}
	return nil
}

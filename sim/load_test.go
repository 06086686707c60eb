package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// loadSession is one established session through a front that reads its
// branch's row 1 in a loop, as fast as it is answered, and records when each
// read ended, so that its rate can be compared across the phases of a scenario.
type loadSession struct {
	front  *member
	branch string
	conn   *pgx.Conn
	stopc  chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	ends   []time.Time
	err    error // what ended it early, if anything
	failAt time.Time
}

// startLoad opens a session on branch through f and starts its reads.
func (c *cluster) startLoad(ctx context.Context, f *member, branch string) (*loadSession, error) {
	conn, err := c.connect(ctx, f, "app@"+branch)
	if err != nil {
		return nil, fmt.Errorf("session on %s through %s: %w", branch, f.name, err)
	}
	s := &loadSession{front: f, branch: branch, conn: conn, stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stopc:
				return
			default:
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			var v string
			err := conn.QueryRow(rctx, "SELECT v FROM t WHERE id = 1").Scan(&v)
			cancel()
			if err == nil && v != branch {
				err = fmt.Errorf("read %q, want %q", v, branch)
			}
			s.mu.Lock()
			if err != nil {
				s.err, s.failAt = err, time.Now()
			} else {
				s.ends = append(s.ends, time.Now())
			}
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s, nil
}

// rate is the reads per second that ended in [from, to).
func (s *loadSession) rate(from, to time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.ends {
		if !e.Before(from) && e.Before(to) {
			n++
		}
	}
	return float64(n) / to.Sub(from).Seconds()
}

// failure is what ended the session early and when; nil while it reads on.
func (s *loadSession) failure() (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failAt, s.err
}

// stop ends the reads and closes the session.
func (s *loadSession) stop() {
	select {
	case <-s.stopc:
	default:
		close(s.stopc)
	}
	<-s.done
	s.conn.Close(context.Background())
}

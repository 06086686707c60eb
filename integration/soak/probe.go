package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// catalogProbe times a fresh connection and read of a Postgres catalog twice a
// second, from the warm-up to the end of the load, so that a run can tell a slow
// catalog (fronts count one that takes over 2 s to answer as down) from a failed
// one. A SQLite catalog is not probed: the soak's readers would hold back its WAL
// checkpoints, whose growth the soak judges. A nil probe reports nothing.
type catalogProbe struct {
	mu       sync.Mutex
	n, over2 int
	slowest  time.Duration
	failed   int
	stop     context.CancelFunc
	done     chan struct{}
}

func startProbe(cat catalogDB) *catalogProbe {
	if cat.file != "" {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &catalogProbe{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			t := time.Now()
			_, err := cat.stats()
			d := time.Since(t)
			p.mu.Lock()
			p.n++
			if err != nil {
				p.failed++
			}
			if d > 2*time.Second {
				p.over2++
			}
			p.slowest = max(p.slowest, d)
			p.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return p
}

// report stops the probe and prints what it saw.
func (p *catalogProbe) report(w io.Writer) {
	if p == nil {
		return
	}
	p.stop()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(w, "soak: the soak's own catalog reads (connect, 2 counts): %d, slowest %s, %d over 2 s, %d failed\n",
		p.n, p.slowest.Round(time.Millisecond), p.over2, p.failed)
}

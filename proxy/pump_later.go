package proxy

import (
	"sync"
	"time"
)

// afterLoop is what ended sessions and resets leave to do outside a pump's loop:
// telling a session's owner how it ended (pumpSession.ended), parking a server
// session the pump has reset (pumpReset.then). The loop only queues it. It runs
// when the next client comes through the proxy (Server.serverSession runs it
// before it looks for a parked session), or on the pump's drainer once the oldest
// entry has waited laterDelay. A client that could reuse a server session then
// always finds it parked, and the end of a short session, in a burst of them,
// wakes no goroutine.
type afterLoop struct {
	mu    sync.Mutex
	fns   []func()
	since time.Time // when the oldest entry was queued
}

// laterDelay is how long an entry waits at most for a client to run it before the
// drainer is woken for it. A session's end releases its branch lease (which stops,
// resets and ephemeral destroys wait for) no later than this after the client left.
const laterDelay = 2 * time.Millisecond

func (a *afterLoop) add(fn func()) {
	a.mu.Lock()
	if len(a.fns) == 0 {
		a.since = time.Now()
	}
	a.fns = append(a.fns, fn)
	a.mu.Unlock()
}

// take empties the queue and returns what was in it, oldest first.
func (a *afterLoop) take() []func() {
	a.mu.Lock()
	defer a.mu.Unlock()
	fns := a.fns
	a.fns = nil
	return fns
}

func (a *afterLoop) waiting() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.fns) > 0
}

// due reports whether the oldest entry has waited laterDelay by now.
func (a *afterLoop) due(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.fns) > 0 && now.Sub(a.since) >= laterDelay
}

// runLater runs what the loop has queued. Any goroutine may call it.
func (p *pump) runLater() {
	for _, fn := range p.later.take() {
		fn()
	}
}

// kickDrainer has the drainer run what is queued, if anything is.
func (p *pump) kickDrainer() {
	if !p.later.waiting() {
		return
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// drainer runs what the loop queued when the loop kicks it, and all that is left
// when the pump closes (close closes kick once the loop has ended).
func (p *pump) drainer() {
	defer close(p.drained)
	for range p.kick {
		p.runLater()
	}
	p.runLater()
}

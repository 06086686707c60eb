package proxy

import (
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

func TestAfterLoop(t *testing.T) {
	var a afterLoop
	if a.waiting() || a.due(time.Now().Add(time.Hour)) {
		t.Fatal("an empty queue waits for nothing")
	}
	var got []int
	a.add(func() { got = append(got, 1) })
	queued := time.Now()
	a.add(func() { got = append(got, 2) })
	if !a.waiting() {
		t.Fatal("queued entries are waiting")
	}
	if a.due(queued.Add(-time.Millisecond)) {
		t.Error("due before laterDelay has passed")
	}
	if !a.due(queued.Add(laterDelay)) {
		t.Error("not due once the oldest entry has waited laterDelay")
	}
	for _, fn := range a.take() {
		fn()
	}
	if !slices.Equal(got, []int{1, 2}) {
		t.Errorf("ran %v, want the entries oldest first", got)
	}
	if a.waiting() || len(a.take()) != 0 {
		t.Error("take leaves the queue empty")
	}
}

// A session added with ended is not waited for: its end is told to ended outside
// the loop (the loop goes on relaying while ended runs), soon after the client
// left even when no other client comes to run the pump's queue.
func TestPumpEndedLater(t *testing.T) {
	p, err := newPump(false)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	client, app := socketPair(t)
	server, backend := socketPair(t)
	defer backend.Close()
	ended := make(chan pumpResult, 1)
	hold := make(chan struct{})
	defer close(hold) // before p.close, which waits for ended to return
	res, err := p.addSession(client, &serverConn{Conn: server, fd: -1}, time.Minute, &sessionTrack{}, nil, false, func(r pumpResult) {
		ended <- r
		<-hold
	})
	if err != nil {
		t.Fatal(err)
	}
	if res != nil {
		t.Error("a session with ended has no result channel")
	}
	app.Write(enc(t, &pgproto3.Terminate{}))
	app.Close()
	// The loop's idle wait is a second; a queued end must not wait for it.
	select {
	case r := <-ended:
		if r.server < 0 {
			t.Error("an idle server session the client terminated was not handed back")
		} else if c, err := fdConn(r.server); err == nil {
			c.Close()
		}
	case <-time.After(500 * time.Millisecond):
		t.Fatal("the session's end was not told within 500ms")
	}
	// ended is still running: the loop must go on relaying.
	c2, app2 := socketPair(t)
	s2, backend2 := socketPair(t)
	defer app2.Close()
	defer backend2.Close()
	if _, err := p.add(c2, s2, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	app2.Write([]byte("ping"))
	backend2.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(backend2, buf); err != nil {
		t.Errorf("the loop stopped relaying while a session's end was being told: %v", err)
	}
}

// Sessions still running when the pump closes are told their end, once, before
// close returns.
func TestPumpEndedAtClose(t *testing.T) {
	p, err := newPump(false)
	if err != nil {
		t.Fatal(err)
	}
	client, app := socketPair(t)
	server, backend := socketPair(t)
	defer app.Close()
	defer backend.Close()
	var calls []pumpResult
	if _, err := p.addSession(client, &serverConn{Conn: server, fd: -1}, time.Minute, &sessionTrack{}, nil, false, func(r pumpResult) {
		calls = append(calls, r)
	}); err != nil {
		t.Fatal(err)
	}
	p.close()
	if len(calls) != 1 {
		t.Fatalf("ended ran %d times by the time close returned, want once", len(calls))
	}
	if calls[0].server >= 0 || calls[0].client >= 0 {
		t.Errorf("a session cut off by close handed back sockets: %+v", calls[0])
	}
}

// A session that comes to a pump that is closing gets an error when nothing would
// wait for its end, so that its owner ends it at once.
func TestPumpEndedAfterClose(t *testing.T) {
	p, err := newPump(false)
	if err != nil {
		t.Fatal(err)
	}
	p.close()
	client, app := socketPair(t)
	server, backend := socketPair(t)
	defer app.Close()
	defer backend.Close()
	_, err = p.addSession(client, &serverConn{Conn: server, fd: -1}, time.Minute, nil, nil, false, func(pumpResult) {
		t.Error("ended called for a session the pump refused")
	})
	if !errors.Is(err, errPumpStopped) {
		t.Errorf("got %v, want errPumpStopped", err)
	}
}

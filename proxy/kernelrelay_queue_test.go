package proxy

import (
	"bytes"
	"testing"
	"time"
)

// The queue toward a server is read from the client socket's reference count:
// packets redirected to a server that does not read raise it, and it falls back
// once the server has read them.
func TestKernelRelayServerQueue(t *testing.T) {
	k := newTestKernelRelay(t, 64<<20)
	p := newKernelPair(t)
	run := startRelay(t, k, p)
	ks := splicedSession(t, k)
	waitFor(time.Now().Add(5*time.Second), time.Millisecond, func() bool { return ks.sm.Slot(0).Hold == 0 })
	if q, err := ks.serverQueue(); err != nil || q > timerRefs {
		t.Fatalf("queue %d (%v) before any byte moved", q, err)
	}
	msg := pgMsg('d', string(bytes.Repeat([]byte("q"), 64<<10-5)))
	const n = 32 // 2 MB: more than the server socket's buffer takes
	for range n {
		p.client.Write(msg)
	}
	var q int
	if !waitFor(time.Now().Add(5*time.Second), time.Millisecond, func() bool {
		q, _ = ks.serverQueue()
		return q > timerRefs
	}) {
		t.Fatalf("2 MB toward a server that does not read: queue %d packets", q)
	}
	t.Logf("queued toward a server that does not read: %d packets", q)
	readExactly(t, p.server, n*len(msg))
	if !waitFor(time.Now().Add(5*time.Second), time.Millisecond, func() bool {
		q, _ = ks.serverQueue()
		return q <= timerRefs
	}) {
		t.Fatalf("the server read everything: queue still %d packets", q)
	}
	p.client.Close()
	run.wait(t)
}

// A client is watched for its hang-up after its direction redirects.
func TestKernelRelayHangUpAfterRelease(t *testing.T) {
	k := newTestKernelRelay(t, 4<<20)
	p := newKernelPair(t)
	run := startRelay(t, k, p)
	q := pgMsg('Q', "select 1\x00")
	p.client.Write(q) // before the release: forwarded by the proxy
	readExactly(t, p.server, len(q))
	ks := splicedSession(t, k)
	if !waitFor(time.Now().Add(5*time.Second), time.Millisecond, func() bool {
		return ks.sm.Slot(0).Hold == 0
	}) {
		t.Fatal("the client's direction was not released")
	}
	p.client.Write(q) // after: redirected
	readExactly(t, p.server, len(q))
	p.client.Close()
	if res := run.wait(t); res.End != EndClientClosed {
		t.Fatalf("end %v, want the client closed", res.End)
	}
}

// splicedSession returns the relay's one session.
func splicedSession(t *testing.T, k *kernelRelay) *ksession {
	t.Helper()
	var ks *ksession
	waitFor(time.Now().Add(5*time.Second), time.Millisecond, func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		for s := range k.sessions {
			ks = s
		}
		return ks != nil
	})
	if ks == nil {
		t.Fatal("no session spliced")
	}
	return ks
}

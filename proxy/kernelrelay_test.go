package proxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/proxy/sockmap"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"
)

// kernelPair is a session's sockets: the client's end and the proxy's (TCP), the
// proxy's and the server's (unix).
type kernelPair struct {
	client       net.Conn
	proxyClient  *net.TCPConn
	proxyBackend *net.UnixConn
	server       net.Conn
}

func newKernelPair(t *testing.T) *kernelPair {
	t.Helper()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	ul, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	p := &kernelPair{}
	if p.client, err = net.Dial("tcp", tl.Addr().String()); err != nil {
		t.Fatal(err)
	}
	c, err := tl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	p.proxyClient = c.(*net.TCPConn)
	b, err := net.Dial("unix", ul.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p.proxyBackend = b.(*net.UnixConn)
	if p.server, err = ul.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.client.Close(); p.server.Close() })
	return p
}

func newTestKernelRelay(t *testing.T, backlog uint64) *kernelRelay {
	t.Helper()
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("needs root (BPF)")
	}
	k, err := newKernelRelay(64, backlog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.close)
	return k
}

func pgMsg(typ byte, body string) []byte {
	n := len(body) + 4
	return append([]byte{typ, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, body...)
}

func readExactly(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	return b
}

type relayRun struct {
	res  RelayResult
	err  error
	done chan struct{}
}

func startRelay(t *testing.T, k *kernelRelay, p *kernelPair) *relayRun {
	r := &relayRun{done: make(chan struct{})}
	log := zaptest.NewLogger(t)
	go func() {
		defer close(r.done)
		r.res, r.err = k.relay(p.proxyClient, p.proxyBackend, 5*time.Second, newRelayStats(RelayKernel), func() {}, log)
	}()
	return r
}

func (r *relayRun) wait(t *testing.T) RelayResult {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		t.Fatal("relay did not return")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.res
}

// The session's end hands the server connection back usable, and the client's
// Terminate never reaches the server.
func TestKernelRelayTerminateKeepsBackend(t *testing.T) {
	k := newTestKernelRelay(t, 4<<20)
	p := newKernelPair(t)
	// The client speaks right away, before the splice is complete.
	q := pgMsg('Q', "select 1\x00")
	p.client.Write(q)
	run := startRelay(t, k, p)
	if got := readExactly(t, p.server, len(q)); !bytes.Equal(got, q) {
		t.Fatalf("server got %q", got)
	}
	reply := bytes.Repeat([]byte("r"), 1<<20)
	p.server.Write(reply)
	if got := readExactly(t, p.client, len(reply)); !bytes.Equal(got, reply) {
		t.Fatal("reply changed on the way")
	}
	// Messages split anywhere, headers included, keep the boundaries tracked.
	stream := append(pgMsg('Q', "select 2\x00"), pgMsg('d', string(bytes.Repeat([]byte("x"), 100000)))...)
	stream = append(stream, pgMsg('c', "")...)
	for i := 0; i < len(stream); {
		n := min(1+i%7, len(stream)-i)
		if i > 20 {
			n = min(70000, len(stream)-i)
		}
		p.client.(*net.TCPConn).SetNoDelay(true)
		p.client.Write(stream[i : i+n])
		i += n
		time.Sleep(time.Millisecond)
	}
	if got := readExactly(t, p.server, len(stream)); !bytes.Equal(got, stream) {
		t.Fatal("split stream changed on the way")
	}
	p.client.Write(pgMsg('X', ""))
	p.client.Close()
	res := run.wait(t)
	if res.End != EndTerminate || res.Backend == nil {
		t.Fatalf("end %v, backend %v; want terminate with the backend", res.End, res.Backend)
	}
	defer res.Backend.Close()
	if tcp, unix := k.entries(); tcp+unix != 0 {
		t.Fatalf("maps hold %d+%d sockets after the session", tcp, unix)
	}
	// The server saw no Terminate: the client ended between queries (its copy
	// ended by CopyDone), so the next bytes it reads are the idle probe's Sync
	// (which this server leaves unanswered), then the caller's.
	res.Backend.Write([]byte("next"))
	if got := readExactly(t, p.server, len(syncMsg)+4); string(got) != string(syncMsg)+"next" {
		t.Fatalf("server read %q after the session; want the idle probe's Sync, then the caller's bytes", got)
	}
	p.server.Write([]byte("back"))
	res.Backend.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got := readExactly(t, res.Backend, 4); string(got) != "back" {
		t.Fatalf("caller read %q", got)
	}
}

// The session ends for the branch once the client has left: the relay reports it
// before it asks the server whether the server session is idle, so that an admin
// reset or stop right after a client's Terminate does not find the session open
// while the server is slow to answer. The server here answers the idle probe only
// once the client's leaving was reported.
func TestKernelRelayLeftBeforeIdleProbe(t *testing.T) {
	k := newTestKernelRelay(t, 4<<20)
	p := newKernelPair(t)
	left := make(chan struct{})
	r := &relayRun{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.res, r.err = k.relay(p.proxyClient, p.proxyBackend, 5*time.Second, newRelayStats(RelayKernel),
			sync.OnceFunc(func() { close(left) }), zaptest.NewLogger(t))
	}()
	q := pgMsg('Q', "delete from t\x00")
	p.client.Write(q)
	if got := readExactly(t, p.server, len(q)); !bytes.Equal(got, q) {
		t.Fatalf("server got %q", got)
	}
	done := append(pgMsg('C', "DELETE 3\x00"), pgMsg('Z', "I")...)
	p.server.Write(done)
	readExactly(t, p.client, len(done))
	p.client.Write(pgMsg('X', ""))
	p.client.Close()
	if got := readExactly(t, p.server, len(syncMsg)); !bytes.Equal(got, syncMsg) {
		t.Fatalf("server got %q, want the idle probe's Sync", got)
	}
	select {
	case <-left:
	case <-r.done:
		t.Fatal("the relay ended without reporting that the client left")
	}
	p.server.Write(pgMsg('Z', "I"))
	res := r.wait(t)
	if res.End != EndTerminate || res.Backend == nil || !res.Idle {
		t.Fatalf("end %v, backend %v, idle %v; want terminate with an idle backend", res.End, res.Backend, res.Idle)
	}
	res.Backend.Close()
}

// A server that closes gets its last bytes to the client before the end.
func TestKernelRelayServerClose(t *testing.T) {
	k := newTestKernelRelay(t, 4<<20)
	p := newKernelPair(t)
	run := startRelay(t, k, p)
	last := bytes.Repeat([]byte("e"), 8<<20)
	go func() {
		p.server.Write(last)
		p.server.Close()
	}()
	time.Sleep(200 * time.Millisecond) // the client reads late
	got, err := io.ReadAll(p.client)
	if err != nil || !bytes.Equal(got, last) {
		t.Fatalf("client got %d of %d bytes: %v", len(got), len(last), err)
	}
	if res := run.wait(t); res.End != EndServerClosed || res.Backend != nil {
		t.Fatalf("end %v, backend %v", res.End, res.Backend)
	}
}

// A server with bytes queued at the splice, more than a read takes at once (its
// send buffer raised, as by an operator's net.core.wmem_default), that sends a few
// short messages of its own while the splice is made (notifications) and streams
// once it is made: the client gets every byte once, in order.
func TestKernelRelayServerQueuedAtSplice(t *testing.T) {
	k := newTestKernelRelay(t, 4<<20)
	p := newKernelPair(t)
	raw, err := p.server.(*net.UnixConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	raw.Control(func(fd uintptr) {
		err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 16<<20)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 12<<20)
	for i := range want {
		want[i] = byte(i / 4093) // runs no nearby offset repeats
	}
	queued, notes := 6<<20, 6<<20+20*200
	if _, err := p.server.Write(want[:queued]); err != nil {
		t.Fatal(err)
	}
	run := startRelay(t, k, p)
	go func() {
		defer p.server.Close()
		for at := queued; at < notes; at += 200 {
			if _, err := p.server.Write(want[at : at+200]); err != nil {
				return
			}
			time.Sleep(500 * time.Microsecond)
		}
		var ks *ksession // splicedSession would call t.Fatal off the test's goroutine
		if !waitFor(time.Now().Add(5*time.Second), time.Millisecond, func() bool {
			k.mu.Lock()
			defer k.mu.Unlock()
			for s := range k.sessions {
				ks = s
			}
			return ks != nil && ks.sm.Slot(sockmap.ToClient).Hold == 0 && ks.sm.Slot(sockmap.ToServer).Hold == 0
		}) {
			t.Error("the splice was not made")
			return
		}
		for b := want[notes:]; len(b) > 0; b = b[min(len(b), 3001):] {
			if _, err := p.server.Write(b[:min(len(b), 3001)]); err != nil {
				return
			}
		}
	}()
	got, err := io.ReadAll(p.client)
	if err != nil || !bytes.Equal(got, want) {
		at := 0
		for at < min(len(got), len(want)) && got[at] == want[at] {
			at++
		}
		t.Fatalf("client got %d of %d bytes, the first wrong one at %d: %v", len(got), len(want), at, err)
	}
	if res := run.wait(t); res.End != EndServerClosed {
		t.Fatalf("end %v", res.End)
	}
}

// A server that said its last words and closed before the splice: the client gets
// them and a clean end (its query sent meanwhile does not turn the close into a
// reset), and nothing joins the maps.
func TestKernelRelayServerClosedBeforeSplice(t *testing.T) {
	k := newTestKernelRelay(t, 4<<20)
	p := newKernelPair(t)
	last := pgMsg('E', "SFATAL\x00C57P01\x00Mterminating connection\x00\x00")
	p.server.Write(last)
	p.server.Close()
	p.client.Write(pgMsg('Q', "select 1\x00")) // sent before the client could know
	time.Sleep(20 * time.Millisecond)
	run := startRelay(t, k, p)
	p.client.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(p.client) // a clean end, not a reset
	if err != nil || !bytes.Equal(got, last) {
		t.Fatalf("client got %q: %v", got, err)
	}
	if res := run.wait(t); res.End != EndServerClosed || res.Backend != nil {
		t.Fatalf("end %v, backend %v", res.End, res.Backend)
	}
	if tcp, uds := k.entries(); tcp != 0 || uds != 0 {
		t.Fatalf("%d TCP and %d unix sockets in the maps", tcp, uds)
	}
}

// A client that does not read what the server had queued at the splice: it is
// cut off after the write timeout, having received a clean prefix, and the
// session ends there instead of being spliced without the bytes it missed.
func TestKernelRelayClientStalledBeforeSplice(t *testing.T) {
	k := newTestKernelRelay(t, 4<<20)
	p := newKernelPair(t)
	p.client.(*net.TCPConn).SetReadBuffer(64 << 10)
	p.proxyClient.SetWriteBuffer(64 << 10)
	queued := make([]byte, 640<<10)
	for i := 0; i < len(queued); i += 4 {
		binary.BigEndian.PutUint32(queued[i:], uint32(i)) // no gap or repeat looks like a prefix
	}
	go p.server.Write(queued)
	time.Sleep(50 * time.Millisecond) // queued before the splice
	r := &relayRun{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.res, r.err = k.relay(p.proxyClient, p.proxyBackend, 300*time.Millisecond, newRelayStats(RelayKernel), func() {}, zaptest.NewLogger(t))
	}()
	select {
	case <-r.done:
	case <-time.After(3 * time.Second):
		p.server.Close() // let a relay that spliced anyway end
	}
	if res := r.wait(t); res.End != EndStalled {
		t.Errorf("end %v, want %v", res.End, EndStalled)
	}
	p.client.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, _ := io.ReadAll(p.client) // ends in a reset
	if len(got) == 0 || !bytes.HasPrefix(queued, got) {
		t.Fatalf("client got %d bytes that are not a prefix of what the server sent", len(got))
	}
	if tcp, uds := k.entries(); tcp != 0 || uds != 0 {
		t.Fatalf("%d TCP and %d unix sockets in the maps", tcp, uds)
	}
}

// How a session ends when the server's bytes could not be moved to the client:
// before the splice (read-ahead) and after it (forwardInitial, forwardHeld) alike.
func TestToClientEnd(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want RelayEnd
	}{
		{fmt.Errorf("%w: %w", errForward, os.ErrDeadlineExceeded), EndStalled},
		{fmt.Errorf("%w: %w", errForward, unix.EPIPE), EndClientClosed},
		{fmt.Errorf("%w: %w", errForward, unix.ECONNRESET), EndClientClosed},
		{errEOF, EndServerClosed},
		{unix.ECONNRESET, EndServerClosed}, // a read of the server's socket
		{errors.New("the splice did not settle"), EndServerClosed},
	} {
		if got := toClientEnd(tt.err); got != tt.want {
			t.Errorf("toClientEnd(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// A client that closes without Terminate: its last bytes reach the server, which
// stays usable.
func TestKernelRelayClientClose(t *testing.T) {
	k := newTestKernelRelay(t, 4<<20)
	p := newKernelPair(t)
	run := startRelay(t, k, p)
	time.Sleep(50 * time.Millisecond)
	q := pgMsg('Q', "commit\x00")
	p.client.Write(q)
	p.client.Close()
	if got := readExactly(t, p.server, len(q)); !bytes.Equal(got, q) {
		t.Fatalf("server got %q", got)
	}
	res := run.wait(t)
	if res.End != EndClientClosed || res.Backend == nil {
		t.Fatalf("end %v, backend %v", res.End, res.Backend)
	}
	res.Backend.Close()
}

// A client that floods a server that does not read: what the proxy takes in stays
// bounded, and every byte arrives in order once the server reads.
func TestKernelRelayFlood(t *testing.T) {
	k := newTestKernelRelay(t, 1<<20)
	p := newKernelPair(t)
	r := &relayRun{done: make(chan struct{})}
	stats := newRelayStats(RelayKernel)
	go func() {
		defer close(r.done)
		r.res, r.err = k.relay(p.proxyClient, p.proxyBackend, 10*time.Second, stats, func() {}, zaptest.NewLogger(t))
	}()
	const total = 64 << 20
	msg := pgMsg('d', string(bytes.Repeat([]byte("f"), 64<<10-5)))
	var sent atomic.Int64
	ks := splicedSession(t, k)
	if !waitFor(time.Now().Add(5*time.Second), time.Millisecond, func() bool { return ks.sm.Slot(0).Hold == 0 }) {
		t.Fatal("the client's direction was not released")
	}
	go func() {
		for sent.Load() < total {
			if _, err := p.client.Write(msg); err != nil {
				return
			}
			sent.Add(int64(len(msg)))
		}
	}()
	time.Sleep(2 * time.Second)
	taken := sent.Load()
	t.Logf("taken while the server did not read: %d MB", taken>>20)
	if taken > 32<<20 {
		t.Errorf("the proxy took %d MB from the client while the server did not read", taken>>20)
	}
	got := 0
	buf := make([]byte, 1<<20)
	p.server.SetReadDeadline(time.Now().Add(30 * time.Second))
	for got < total {
		n, err := p.server.Read(buf)
		if err != nil {
			t.Fatalf("server read %d of %d bytes: %v", got, total, err)
		}
		for i := 0; i < n; i++ {
			off := (got + i) % len(msg)
			if buf[i] != msg[off] {
				t.Fatalf("byte %d differs (offset %d in a message)", got+i, off)
			}
		}
		got += n
	}
	if stats.Pauses() == 0 {
		k.mu.Lock()
		for ks := range k.sessions {
			t.Logf("to server %+v, inject %+v", ks.sm.Slot(0), ks.sm.Slot(2))
		}
		k.mu.Unlock()
		t.Error("the flood never paused")
	}
	p.client.Close()
	r.wait(t)
}

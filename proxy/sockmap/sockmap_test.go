package sockmap_test

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/proxy/sockmap"
)

// pair is a spliced session's four ends: the client's and the server's own
// sockets, and the proxy's two (C: accepted TCP, S: dialled unix).
type pair struct {
	client, c net.Conn // TCP: the client's end, the proxy's end
	s, server net.Conn // unix: the proxy's end, the server's end
	cf, sf    *os.File
}

func newPair(t *testing.T) *pair {
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
	p := &pair{}
	if p.client, err = net.Dial("tcp", tl.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if p.c, err = tl.Accept(); err != nil {
		t.Fatal(err)
	}
	if p.s, err = net.Dial("unix", ul.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if p.server, err = ul.Accept(); err != nil {
		t.Fatal(err)
	}
	p.cf, _ = p.c.(*net.TCPConn).File()
	p.sf, _ = p.s.(*net.UnixConn).File()
	t.Cleanup(func() {
		for _, c := range []io.Closer{p.client, p.c, p.s, p.server, p.cf, p.sf} {
			c.Close()
		}
	})
	return p
}

func needRoot(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("needs root (BPF)")
	}
}

func readN(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	return b
}

func msg(typ byte, body []byte) []byte {
	n := len(body) + 4
	return append([]byte{typ, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, body...)
}

// splice loads the programs and puts a new pair's sockets into the maps (the
// programs are unloaded when the test ends).
func splice(t *testing.T) (*sockmap.Relay, *pair, *sockmap.Session) {
	t.Helper()
	needRoot(t)
	r, err := sockmap.Load(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	p := newPair(t)
	s, err := r.Add(int(p.cf.Fd()), int(p.sf.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return r, p, s
}

func TestSplice(t *testing.T) {
	r, p, s := splice(t)
	// Both directions start held. Server to client, released: redirected.
	if st := s.Slot(sockmap.ToClient); st.Hold == 0 {
		t.Fatalf("server direction not held at the start: %+v", st)
	}
	s.Hold(sockmap.ToClient, false)
	want := bytes.Repeat([]byte("server says "), 1000)
	p.server.Write(want)
	if got := readN(t, p.client, len(want)); !bytes.Equal(got, want) {
		t.Fatal("server bytes changed on the way")
	}
	if st := s.Slot(sockmap.ToClient); st.Bytes != uint64(len(want)) {
		t.Fatalf("redirected to client: %d, want %d", st.Bytes, len(want))
	}
	// Client to server: held until released; a held message is read by the proxy.
	q := msg('Q', []byte("select 1\x00"))
	p.client.Write(q)
	if got := readN(t, p.c, len(q)); !bytes.Equal(got, q) {
		t.Fatalf("held message: %q", got)
	}
	st := s.Slot(sockmap.ToServer)
	if st.Passed != uint64(len(q)) {
		t.Fatalf("passed %d, want %d", st.Passed, len(q))
	}
	s.Ack(sockmap.ToServer, st.Passed)
	s.Hold(sockmap.ToServer, false)
	q2 := msg('Q', []byte("select 3\x00"))
	p.client.Write(q2)
	time.Sleep(100 * time.Millisecond)
	t.Logf("after q2: %+v", s.Slot(sockmap.ToServer))
	if got := readN(t, p.server, len(q2)); !bytes.Equal(got, q2) {
		t.Fatal("client bytes changed on the way")
	}
	big := msg('d', bytes.Repeat([]byte{7}, 300<<10)) // longer than a parser chunk
	two := append(msg('Q', []byte("select 2\x00")), big...)
	p.client.Write(two)
	time.Sleep(300 * time.Millisecond)
	t.Logf("after two: %+v", s.Slot(sockmap.ToServer))
	if got := readN(t, p.server, len(two)); !bytes.Equal(got, two) {
		t.Fatal("client bytes changed on the way")
	}
	// Terminate goes to the proxy, not the server.
	p.client.Write(msg('X', nil))
	if got := readN(t, p.c, 5); got[0] != 'X' {
		t.Fatalf("terminate: %q", got)
	}
	if st := s.Slot(sockmap.ToServer); st.Flags&sockmap.FlagTerminate == 0 {
		t.Fatalf("terminate flag not set: %+v", st)
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if tcp, unix := r.Entries(); tcp+unix != 0 {
		t.Fatalf("maps hold %d+%d sockets after remove", tcp, unix)
	}
}

// The client direction's slot says whether the client is between queries, as the
// pumps' track does: COPY FROM STDIN under a Query ends synced at its CopyDone or
// CopyFail; under the extended protocol only a Sync does.
func TestSyncState(t *testing.T) {
	_, p, s := splice(t)
	defer s.Remove()
	data := msg('d', []byte("1\tone\n"))
	sent := 0
	for _, step := range []struct {
		name     string
		msgs     [][]byte
		unsynced bool
	}{
		{"query", [][]byte{msg('Q', []byte("select 1\x00"))}, false},
		{"copy data after a query", [][]byte{msg('Q', []byte("copy t from stdin\x00")), data}, true},
		{"copy done", [][]byte{data, msg('c', nil)}, false},
		{"copy fail after a query", [][]byte{msg('Q', []byte("copy t from stdin\x00")), data, msg('f', []byte("no\x00"))}, false},
		{"extended copy done", [][]byte{msg('P', []byte("\x00copy t from stdin\x00\x00\x00")), msg('E', []byte("\x00\x00\x00\x00\x00")), data, msg('c', nil)}, true},
		{"sync", [][]byte{msg('S', nil)}, false},
		{"copy done alone", [][]byte{msg('c', nil)}, true},
		{"query again", [][]byte{msg('Q', []byte("select 1\x00"))}, false},
	} {
		var b []byte
		for _, m := range step.msgs {
			b = append(b, m...)
		}
		p.client.Write(b)
		sent += len(b)
		readN(t, p.c, len(b)) // held: handed to the proxy
		st := s.Slot(sockmap.ToServer)
		if st.Passed != uint64(sent) || !st.Boundary || st.Unsynced != step.unsynced {
			t.Fatalf("%s: slot %+v, want %d bytes passed, at a boundary, unsynced %v", step.name, st, sent, step.unsynced)
		}
	}
}

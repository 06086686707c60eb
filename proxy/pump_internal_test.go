package proxy

import (
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// socketPair returns two connected Go unix-socket connections.
func socketPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	return conns[0], conns[1]
}

// openSome opens n files, to take the lowest free descriptor numbers.
func openSome(t *testing.T, n int) []*os.File {
	var out []*os.File
	for i := 0; i < n; i++ {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// A pump closed while add is registering a session must close the session's
// descriptors once: a second close would close whatever took their numbers.
func TestPumpAddRacingClose(t *testing.T) {
	p, err := newPump(false)
	if err != nil {
		t.Fatal(err)
	}
	client, peer1 := socketPair(t)
	server, peer2 := socketPair(t)
	defer peer1.Close()
	defer peer2.Close()
	var taken []*os.File
	closed := make(chan struct{})
	p.beforeEpollAdd = func() {
		go func() { p.close(); close(closed) }()
		select {
		case <-closed: // the loop ended the session: take the numbers it freed
			taken = openSome(t, 8)
		case <-time.After(200 * time.Millisecond):
		}
	}
	res, err := p.add(client, server, time.Second, nil)
	<-closed
	if taken == nil {
		taken = openSome(t, 8)
	}
	for _, f := range taken {
		if _, ferr := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0); ferr != nil {
			t.Errorf("descriptor %d, opened after the session ended, was closed by the pump (add: %v)", f.Fd(), err)
		}
		f.Close()
	}
	if err == nil {
		select {
		case <-res:
		case <-time.After(5 * time.Second):
			t.Error("the session's end was not reported")
		}
	}
}

package front

import (
	"net"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"golang.org/x/sys/unix"
)

// pair returns the two ends of a loopback TCP connection.
func pair(t *testing.T) (near, far net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	near, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if far, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { near.Close(); far.Close() })
	return near, far
}

// TestNodeConns: the newest kept connection to a node is taken first; one the
// node closed, or kept too long, is passed over and closed; at most
// keptPerNode are kept; nothing is kept after close.
func TestNodeConns(t *testing.T) {
	var p nodeConns
	older, _ := pair(t)
	newer, _ := pair(t)
	closedByNode, far := pair(t)
	p.put("n1", "a", older)
	p.put("n1", "a", newer)
	if c := p.take("n1", "a"); c != newer {
		t.Fatalf("took %v, want the newest", c)
	}
	if c := p.take("n2", "a"); c != nil {
		t.Fatalf("took a connection to another node")
	}
	p.put("n1", "a", closedByNode)
	far.Close()
	for deadline := time.Now().Add(5 * time.Second); proxy.Quiet(closedByNode) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // until the FIN has arrived
	}
	if c := p.take("n1", "a"); c != older {
		t.Fatalf("took %v, want the one the node did not close", c)
	}
	if c := p.take("n1", "a"); c != nil {
		t.Fatalf("took %v from an empty list", c)
	}

	for range keptPerNode + 2 {
		c, _ := pair(t)
		p.put("n1", "a", c)
	}
	if n := p.count(); n != keptPerNode {
		t.Fatalf("kept %d, want %d", n, keptPerNode)
	}
	p.sweep(time.Now().Add(keptFor))
	if n := p.count(); n != 0 {
		t.Fatalf("kept %d after keptFor, want none", n)
	}
	c, _ := pair(t)
	p.close()
	p.put("n1", "a", c)
	if n := p.count(); n != 0 {
		t.Fatalf("kept %d after close", n)
	}
}

// TestNodeDialerUserTimeout: connections to nodes give up on data that goes
// unacknowledged for unackedFor.
func TestNodeDialerUserTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := nodeDialer().Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var gerr error
	raw.Control(func(fd uintptr) { got, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT) })
	if gerr != nil || time.Duration(got)*time.Millisecond != unackedFor {
		t.Fatalf("TCP_USER_TIMEOUT %d ms (%v), want %v", got, gerr, unackedFor)
	}
}

// count returns how many connections are kept.
func (p *nodeConns) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, list := range p.idle {
		n += len(list)
	}
	return n
}

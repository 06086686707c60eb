package front

import (
	"net"
	"sync"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/proxy"
)

// Connections to nodes outlive their sessions: a session that ends cleanly
// leaves its connection with the node ready for another start-up
// (proxy.OptKeepConn), and the next session to that node through this front
// takes it instead of connecting and shaking hands again.
const (
	// keptPerNode is how many idle connections to one node are kept; more
	// are closed as their sessions end.
	keptPerNode = 32
	// keptFor is how long an idle connection is kept: less than the node
	// waits on one (two minutes), so that the front, not the node, ends it.
	keptFor = time.Minute
)

// nodeConns are the idle connections to each node, newest last. Safe for
// concurrent use.
type nodeConns struct {
	mu     sync.Mutex
	idle   map[nodeAddr][]keptConn
	closed bool
}

type nodeAddr struct{ node, addr string }

type keptConn struct {
	c     net.Conn
	since time.Time
}

// take returns the newest idle connection to node at addr that is still open
// and quiet, or nil; it closes the ones it passes over.
func (p *nodeConns) take(node, addr string) net.Conn {
	k := nodeAddr{node, addr}
	now := time.Now()
	for {
		p.mu.Lock()
		list := p.idle[k]
		if len(list) == 0 {
			p.mu.Unlock()
			return nil
		}
		kc := list[len(list)-1]
		p.idle[k] = list[:len(list)-1]
		p.mu.Unlock()
		if now.Sub(kc.since) < keptFor && proxy.Quiet(kc.c) {
			return kc.c
		}
		kc.c.Close()
	}
}

// put keeps c, a connection to node at addr ready for another session.
func (p *nodeConns) put(node, addr string, c net.Conn) {
	k := nodeAddr{node, addr}
	p.mu.Lock()
	if p.closed || len(p.idle[k]) >= keptPerNode {
		p.mu.Unlock()
		c.Close()
		return
	}
	if p.idle == nil {
		p.idle = map[nodeAddr][]keptConn{}
	}
	p.idle[k] = append(p.idle[k], keptConn{c, time.Now()})
	p.mu.Unlock()
}

// sweep closes the connections kept longer than keptFor.
func (p *nodeConns) sweep(now time.Time) {
	var old []net.Conn
	p.mu.Lock()
	for k, list := range p.idle {
		i := 0
		for i < len(list) && now.Sub(list[i].since) >= keptFor {
			old = append(old, list[i].c)
			i++
		}
		if i == len(list) {
			delete(p.idle, k)
		} else {
			p.idle[k] = list[i:]
		}
	}
	p.mu.Unlock()
	for _, c := range old {
		c.Close()
	}
}

// close closes every idle connection and keeps none from then on.
func (p *nodeConns) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, list := range idle {
		for _, kc := range list {
			kc.c.Close()
		}
	}
}

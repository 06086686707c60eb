package proxy

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// cancelTarget is where a client's cancel key leads: the backend's real key and a
// way to reach its server.
type cancelTarget struct {
	dial      func(context.Context) (net.Conn, error)
	pid       uint32
	secret    []byte
	issuedFor string // for logs
}

// cancels maps the keys the proxy issued to their backends. A key is the backend's
// real process id, so that what the client is told agrees with pg_stat_activity,
// pg_terminate_backend and NOTIFY, and a random secret of the proxy's own, never the
// server's; lookups match the whole key. An entry lives exactly as long as its
// session. Safe for concurrent use.
type cancels struct {
	mu sync.Mutex
	m  map[string]*cancelEntry
}

type cancelEntry struct {
	target   cancelTarget
	inflight sync.WaitGroup // forwards under way
}

func newCancels() *cancels { return &cancels{m: map[string]*cancelEntry{}} }

func cancelKey(pid uint32, secret []byte) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], pid)
	return string(b[:]) + string(secret)
}

// issue registers t under t's process id and returns a random secret of secretLen
// bytes to give the client with it (4 in protocol 3.0, up to 256 in 3.2). Process
// ids of different branch servers can be equal (containers have their own); the
// secret tells them apart.
func (c *cancels) issue(t cancelTarget, secretLen int) []byte {
	secret := make([]byte, secretLen)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		rand.Read(secret)
		k := cancelKey(t.pid, secret)
		if _, taken := c.m[k]; !taken {
			c.m[k] = &cancelEntry{target: t}
			return secret
		}
	}
}

// keep registers t under its own key, the one its server issued, when no session
// holds that key already: a session on a node behind a front, whose client is
// given the node's key so that a cancel reaching any front can be passed to the
// node (Config.CancelElsewhere).
func (c *cancels) keep(t cancelTarget) bool {
	k := cancelKey(t.pid, t.secret)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, taken := c.m[k]; taken {
		return false
	}
	c.m[k] = &cancelEntry{target: t}
	return true
}

// revoke ends a key and waits for the cancels it is forwarding: once it returns, no
// cancel of that session can reach its server session, which may serve another
// client next.
func (c *cancels) revoke(pid uint32, secret []byte) {
	c.mu.Lock()
	e := c.m[cancelKey(pid, secret)]
	delete(c.m, cancelKey(pid, secret))
	c.mu.Unlock()
	if e != nil {
		e.inflight.Wait()
	}
}

// forward sends the cancel to the backend the key leads to, if it is live.
func (c *cancels) forward(pid uint32, secret []byte, timeout time.Duration) (cancelTarget, bool, error) {
	c.mu.Lock()
	e := c.m[cancelKey(pid, secret)]
	if e != nil {
		e.inflight.Add(1)
	}
	c.mu.Unlock()
	if e == nil {
		return cancelTarget{}, false, nil
	}
	defer e.inflight.Done()
	return e.target, true, e.target.forward(timeout)
}

// forward sends a CancelRequest with the backend's real key to its server. Like
// Postgres, it never answers the client.
func (t cancelTarget) forward(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := t.dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	buf, err := (&pgproto3.CancelRequest{ProcessID: t.pid, SecretKey: t.secret}).Encode(nil)
	if err != nil {
		return err
	}
	if _, err := conn.Write(buf); err != nil {
		return err
	}
	// Wait for the server to close its end, so the cancel has been delivered when we return.
	var one [1]byte
	conn.Read(one[:])
	return nil
}

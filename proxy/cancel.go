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

// cancels maps the keys the proxy issued to their backends. Keys are random; an
// entry lives exactly as long as its session. Safe for concurrent use.
type cancels struct {
	mu sync.Mutex
	m  map[string]cancelTarget
}

func newCancels() *cancels { return &cancels{m: map[string]cancelTarget{}} }

func cancelKey(pid uint32, secret []byte) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], pid)
	return string(b[:]) + string(secret)
}

// issue registers t and returns the process id and a random secret of secretLen
// bytes to give the client (4 in protocol 3.0, up to 256 in 3.2).
func (c *cancels) issue(t cancelTarget, secretLen int) (uint32, []byte) {
	secret := make([]byte, secretLen)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		var b [4]byte
		rand.Read(b[:])
		rand.Read(secret)
		pid := binary.BigEndian.Uint32(b[:]) & 0x7fffffff
		k := cancelKey(pid, secret)
		if _, taken := c.m[k]; !taken && pid != 0 {
			c.m[k] = t
			return pid, secret
		}
	}
}

func (c *cancels) revoke(pid uint32, secret []byte) {
	c.mu.Lock()
	delete(c.m, cancelKey(pid, secret))
	c.mu.Unlock()
}

func (c *cancels) lookup(pid uint32, secret []byte) (cancelTarget, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[cancelKey(pid, secret)]
	return t, ok
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

package catalog_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// cutProxy relays a catalog's connections between a unix socket of its own and
// the server's, and can cut the connection that sends the next COMMIT: before
// forwarding it (the transaction never commits) or after the server has answered
// it (the transaction commits, and the client never hears so).
type cutProxy struct {
	dir string
	mu  sync.Mutex
	arm string // "", "before" or "after"
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	p := &cutProxy{dir: t.TempDir()}
	ln, err := net.Listen("unix", filepath.Join(p.dir, ".s.PGSQL.5432"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("unix", target)
			if err != nil {
				c.Close()
				continue
			}
			go p.relay(c, s)
		}
	}()
	return p
}

// take returns the armed cut and disarms it.
func (p *cutProxy) take() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.arm
	p.arm = ""
	return a
}

func (p *cutProxy) set(a string) {
	p.mu.Lock()
	p.arm = a
	p.mu.Unlock()
}

func (p *cutProxy) relay(c, s net.Conn) {
	defer c.Close()
	defer s.Close()
	committed := make(chan struct{}) // the server answered a COMMIT to cut after
	cutAfter := make(chan struct{})  // the next COMMIT is to be cut after its answer
	go func() {                      // server to client
		defer c.Close()
		var pending bool
		for {
			typ, msg, err := readMsg(s, true)
			if err != nil {
				return
			}
			select {
			case <-cutAfter:
				pending, cutAfter = true, nil
			default:
			}
			if pending && typ == 'Z' {
				close(committed)
				return // the answer to the COMMIT never reaches the client
			}
			if _, err := c.Write(msg); err != nil {
				return
			}
		}
	}()
	// Client to server: the startup message has no type byte.
	if _, msg, err := readMsg(c, false); err != nil || writeAll(s, msg) != nil {
		return
	}
	for {
		typ, msg, err := readMsg(c, true)
		if err != nil {
			return
		}
		if typ == 'Q' && strings.HasPrefix(strings.ToLower(string(msg[5:])), "commit") {
			switch p.take() {
			case "before":
				return
			case "after":
				close(cutAfter)
				if writeAll(s, msg) != nil {
					return
				}
				<-committed
				return
			}
		}
		if writeAll(s, msg) != nil {
			return
		}
	}
}

func writeAll(w io.Writer, b []byte) error { _, err := w.Write(b); return err }

// readMsg reads one protocol message, whole.
func readMsg(r io.Reader, typed bool) (byte, []byte, error) {
	n := 4
	if typed {
		n = 5
	}
	head := make([]byte, n)
	if _, err := io.ReadFull(r, head); err != nil {
		return 0, nil, err
	}
	size := int(binary.BigEndian.Uint32(head[n-4:]))
	msg := make([]byte, n+size-4)
	copy(msg, head)
	if _, err := io.ReadFull(r, msg[n:]); err != nil {
		return 0, nil, err
	}
	var typ byte
	if typed {
		typ = head[0]
	}
	return typ, bytes.Clone(msg), nil
}

// TestClaimCommitLost: a claim whose COMMIT reply is lost, though the server
// committed it, is reported as recorded; one whose COMMIT never reached the
// server is reported as failed, and the member is still pooled.
func TestClaimCommitLost(t *testing.T) {
	t.Parallel()
	dsn := catalog.TestPostgresDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	p := startCutProxy(t, filepath.Join(q.Get("host"), ".s.PGSQL.5432"))
	q.Set("host", p.dir)
	u.RawQuery = q.Encode()
	if _, err := os.Stat(filepath.Join(p.dir, ".s.PGSQL.5432")); err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Open(u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addSources(t, c, "a")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	member := func(name string) int64 {
		id, err := c.InsertBranch(ctx, catalog.Branch{Source: "a", Name: name, State: catalog.Running, Pooled: true}, "warm pool")
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	state := func(id int64) (string, bool) {
		all, err := c.Branches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range all {
			if b.ID == id {
				return b.Name, b.Pooled
			}
		}
		t.Fatalf("branch %d is gone", id)
		return "", false
	}

	lost := member("_pool-1")
	p.set("after")
	if err := c.ClaimBranch(ctx, lost, catalog.Claim{Name: "feature", At: time.Unix(1, 0)}, "claim"); err != nil {
		t.Fatalf("a claim committed whose reply was lost = %v, want nil: it was recorded", err)
	}
	if name, pooled := state(lost); name != "feature" || pooled {
		t.Fatalf("after a lost reply the member is %q pooled=%v, want claimed as feature", name, pooled)
	}

	never := member("_pool-2")
	p.set("before")
	err = c.ClaimBranch(ctx, never, catalog.Claim{Name: "other", At: time.Unix(1, 0)}, "claim")
	if err == nil || errors.Is(err, catalog.ErrClaimUnknown) {
		t.Fatalf("a claim whose COMMIT never arrived = %v, want its error", err)
	}
	if name, pooled := state(never); name != "_pool-2" || !pooled {
		t.Fatalf("after a COMMIT that never arrived the member is %q pooled=%v, want still pooled", name, pooled)
	}
}

package catalog_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// stmtRelay sits between a catalog and its Postgres server on a unix socket of
// its own and counts the statements the catalog sends with arguments: Bind
// messages of the extended protocol, one per statement executed, whatever the
// driver's statement cache holds. BEGIN, COMMIT and the driver's pings go as
// simple queries and are not counted.
type stmtRelay struct {
	ln    net.Listener
	up    string
	binds atomic.Int64
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// relayDSN starts a relay in front of the server of dsn (a catalogtest URL,
// whose host is the socket directory) and returns the URL through it. The relay
// stops when the test ends, after the catalogs opened later are closed.
func relayDSN(t *testing.T, dsn string) (string, *stmtRelay) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	dir := t.TempDir()
	r := &stmtRelay{up: filepath.Join(q.Get("host"), ".s.PGSQL.5432")}
	if r.ln, err = net.Listen("unix", filepath.Join(dir, ".s.PGSQL.5432")); err != nil {
		t.Fatal(err)
	}
	r.wg.Add(1)
	go r.serve()
	t.Cleanup(r.stop)
	q.Set("host", dir)
	u.RawQuery = q.Encode()
	return u.String(), r
}

func (r *stmtRelay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("unix", r.up)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, c, s)
		r.mu.Unlock()
		r.wg.Add(2)
		go func() {
			defer r.wg.Done()
			io.Copy(c, s)
			c.Close()
		}()
		go func() {
			defer r.wg.Done()
			r.frontend(c, s)
			s.Close()
		}()
	}
}

// frontend forwards what the client sends, counting Bind messages. The startup
// packet (after an SSL or GSSAPI request that the server refuses) has no type byte.
func (r *stmtRelay) frontend(c, s net.Conn) {
	for startup := true; ; {
		var hdr [5]byte
		n := 5
		if startup {
			n = 4
		}
		if _, err := io.ReadFull(c, hdr[:n]); err != nil {
			return
		}
		size := binary.BigEndian.Uint32(hdr[n-4 : n])
		body := make([]byte, size-4)
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		if startup {
			code := binary.BigEndian.Uint32(body[:4])
			startup = code == 80877103 || code == 80877104
		} else if hdr[0] == 'B' {
			r.binds.Add(1)
		}
		if _, err := s.Write(append(hdr[:n:n], body...)); err != nil {
			return
		}
	}
}

func (r *stmtRelay) stop() {
	r.ln.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// TestFenceSendsNoStatement: on Postgres, a fenced write sends as many
// statements as the same write by a process that has not registered: the node
// row is checked inside the write's own statement, not by one of its own.
func TestFenceSendsNoStatement(t *testing.T) {
	catalog.TestNeedPostgres(t)
	ctx := context.Background()
	counts := map[bool]map[string]int64{}
	for _, fenced := range []bool{false, true} {
		dsn, r := relayDSN(t, catalog.TestPostgresDSN(t))
		c := openAgain(t, dsn)
		addSources(t, c, "a")
		if fenced {
			if _, err := c.Register(ctx, "n1", "", time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		counts[fenced] = map[string]int64{}
		count := func(op string, fn func() error) {
			t.Helper()
			before := r.binds.Load()
			if err := fn(); err != nil {
				t.Fatalf("%s (fenced %v): %v", op, fenced, err)
			}
			counts[fenced][op] = r.binds.Load() - before
		}
		for i := range 2 { // the second round with the driver's statement cache warm
			b := catalog.Branch{Source: "a", Name: fmt.Sprint("b", i), State: catalog.Creating}
			p := catalog.Branch{Source: "a", Name: fmt.Sprint("pool", i), State: catalog.Running, Pooled: true}
			sd := catalog.Seed{Source: "a"}
			count("InsertBranch", func() (err error) { b.ID, err = c.InsertBranch(ctx, b, "create"); return err })
			b.State = catalog.Running
			count("UpdateBranch", func() error { return c.UpdateBranch(ctx, b, "ready") })
			count("Touch", func() error { return c.Touch(ctx, map[int64]time.Time{b.ID: time.Now()}) })
			count("DeleteBranch", func() error { return c.DeleteBranch(ctx, b, "destroyed") })
			if _, err := c.InsertBranch(ctx, p, "fill pool"); err != nil {
				t.Fatal(err)
			}
			bs, err := c.Branches(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range bs {
				if x.Name == p.Name {
					p.ID = x.ID
				}
			}
			count("ClaimBranch", func() error {
				return c.ClaimBranch(ctx, p.ID, catalog.Claim{Name: fmt.Sprint("claimed", i), At: time.Now()}, "claim")
			})
			count("AddSeed", func() (err error) { sd, err = c.AddSeed(ctx, sd); return err })
			sd.State = catalog.SeedReady
			count("UpdateSeed", func() error { return c.UpdateSeed(ctx, sd) })
			count("DeleteSeed", func() error { return c.DeleteSeed(ctx, sd.ID) })
		}
	}
	for op, n := range counts[false] {
		t.Logf("%s: %d statements unfenced, %d fenced", op, n, counts[true][op])
		switch {
		case n == 0:
			t.Errorf("%s: no statement went through the relay", op)
		case counts[true][op] != n:
			t.Errorf("%s sends %d statements fenced, %d unfenced: the fence costs statements of its own", op, counts[true][op], n)
		}
	}
}

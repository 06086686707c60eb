package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestFrontsAndNodes: two nodes and two fronts on one Postgres catalog. A source
// added on one node serves branches on both; new names spread over the nodes,
// and twenty clients racing for one new name through both fronts all land on
// one branch; a node killed takes only its own branches away (57P03 through
// either front once the owner was tried for 10 s), and a client that connects
// while it restarts waits for it and is served.
func TestFrontsAndNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, url := startCatalog(t, ctx)
	stateA, stateB := newStateDir(t), newStateDir(t)
	a := startServer(t, stateA, "--catalog", url, "--role", "node")
	b := startServer(t, stateB, "--catalog", url, "--role", "node")
	a.seedSQL("app", lifecycleSQL)
	f1, f2 := startFront(t, url), startFront(t, url)
	waitSeedCopy(t, b, "app")

	on := map[string]string{} // branch -> node server ("a" or "b")
	for i := range 16 {
		name := fmt.Sprintf("n%d", i)
		fr := []*server{f1, f2}[i%2]
		if out, err := fr.psql(t, "app@"+name, "UPDATE t SET v = '"+name+"' WHERE id = 1 RETURNING v"); err != nil || out != name+"\nUPDATE 1" {
			t.Fatalf("write %s through a front: %q %v\n%s", name, out, err, fr.logs())
		}
	}
	for _, n := range []struct {
		id string
		s  *server
	}{{"a", a}, {"b", b}} {
		for name := range n.s.branches() {
			if prev, dup := on[name]; dup {
				t.Fatalf("branch %s on node %s and on node %s", name, prev, n.id)
			}
			on[name] = n.id
		}
	}
	count := map[string]int{}
	for _, n := range on {
		count[n]++
	}
	if len(on) != 16 || count["a"] == 0 || count["b"] == 0 {
		t.Fatalf("16 new branches landed %v, want all 16 spread over both nodes", count)
	}

	// Twenty clients race for one new name through both fronts.
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fr := []*server{f1, f2}[i%2]
			if out, err := fr.psql(t, "app@race", "SELECT v FROM t WHERE id = 2"); err != nil || out != "seed" {
				errs <- fmt.Errorf("client %d: %q %v", i, out, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	_, onA := a.branches()["race"]
	_, onB := b.branches()["race"]
	if onA == onB {
		t.Fatalf("branch race on node a: %v, on node b: %v; want exactly one", onA, onB)
	}

	// A source is not removed from under other nodes' branches: a third node,
	// with none of its own, is refused.
	c := startServer(t, newStateDir(t), "--catalog", url, "--role", "node")
	if out, err := c.cli("source", "rm", "app"); err == nil || !strings.Contains(out, "on other nodes") {
		t.Fatalf("source rm on a node without branches while others have some: %v\n%s", err, out)
	}
	c.stop()

	// Node b dies: its branches are refused, a's are served, through either front.
	var ofA, ofB string
	for name, n := range on {
		if n == "a" {
			ofA = name
		} else {
			ofB = name
		}
	}
	testCancelAcrossFronts(t, ctx, f1, f2, ofA)

	b.kill9()
	var dead sync.WaitGroup
	for _, fr := range []*server{f1, f2} {
		if out, err := fr.psql(t, "app@"+ofA, "SELECT v FROM t WHERE id = 1"); err != nil || out != ofA {
			t.Fatalf("%s on the live node: %q %v", ofA, out, err)
		}
		dead.Add(1)
		go func() {
			defer dead.Done()
			// Refused once the front has tried the owner for 10 s.
			if err := tryConnect(fr.dsn("app@" + ofB)); pgCode(err) != "57P03" {
				t.Errorf("%s on the dead node: %v, want 57P03", ofB, err)
			}
		}()
	}
	dead.Wait()
	// A client that connects while the node restarts (same state directory: the
	// same node, next epoch) waits for it and is served, with the branch's data.
	waited := make(chan error, 1)
	go func() {
		out, err := f1.psql(t, "app@"+ofB, "SELECT v FROM t WHERE id = 1")
		if err != nil || out != ofB {
			err = fmt.Errorf("read %q (%v), want %q", out, err, ofB)
		}
		waited <- err
	}()
	time.Sleep(time.Second) // the client is waiting for the node by now
	b.start()
	if err := <-waited; err != nil {
		t.Fatalf("a client that connected while its node restarted: %v\n%s", err, f1.logs())
	}
}

// testCancelAcrossFronts: a session opened through one front is cancelled by a
// request sent to the other (as a load balancer may send it); a request with a
// wrong key cancels nothing.
func testCancelAcrossFronts(t *testing.T, ctx context.Context, f1, f2 *server, branch string) {
	t.Helper()
	c := connectDSN(t, ctx, f1.dsn("app@"+branch))
	defer c.Close(ctx)
	done := make(chan error, 1)
	go func() { _, err := c.Exec(ctx, "SELECT pg_sleep(30)"); done <- err }()
	sleeping := func() bool {
		out, err := f2.psql(t, "app@"+branch, "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)'")
		return err == nil && out == "1"
	}
	eventually(t, 20*time.Second, "the sleep to start on the node", sleeping)
	pid, secret := c.PgConn().PID(), c.PgConn().SecretKey()
	wrong := append([]byte(nil), secret...)
	wrong[0] ^= 0xff
	sendCancel(t, f2.addr, pid, wrong)
	if !sleeping() {
		t.Fatal("a cancel with a wrong key stopped the query")
	}
	sendCancel(t, f2.addr, pid, secret)
	select {
	case err := <-done:
		if pgCode(err) != "57014" {
			t.Fatalf("cancelled through the other front: %v, want 57014", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a cancel sent to the other front did not reach the backend")
	}
}

// sendCancel sends a CancelRequest to addr and waits until the proxy has closed
// the connection, which it does once it has passed the request on.
func sendCancel(t *testing.T, addr string, pid uint32, secret []byte) {
	t.Helper()
	msg, err := (&pgproto3.CancelRequest{ProcessID: pid, SecretKey: secret}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("waiting for the proxy to close the cancel connection: %v", err)
	}
}

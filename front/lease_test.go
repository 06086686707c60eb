package front

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/proxy"
)

// A node that is away (refusing connections) is tried again until the wait is
// over; one that answers and refuses the front (a certificate it does not
// expect) is given up at once, with a message that says so.
func TestLeaseDialRetries(t *testing.T) {
	tries := 0
	refused := &lease{node: "n", addr: "a", deadline: time.Now().Add(600 * time.Millisecond),
		dial: func(context.Context, string, string) (net.Conn, error) {
			tries++
			return nil, fmt.Errorf("dial tcp a: %w", syscall.ECONNREFUSED)
		}}
	_, err := refused.Dial(context.Background())
	var ce *proxy.ClientError
	if !errors.As(err, &ce) || ce.Message != "the branch's node is not reachable" || tries < 2 {
		t.Fatalf("an away node: %v after %d tries, want it tried again and then not reachable", err, tries)
	}
	tries = 0
	wrongCert := &lease{node: "n", addr: "a", deadline: time.Now().Add(time.Hour),
		dial: func(context.Context, string, string) (net.Conn, error) {
			tries++
			return nil, errors.New(`node "n": the peer is node "m", not "n"`)
		}}
	_, err = wrongCert.Dial(context.Background())
	if !errors.As(err, &ce) || ce.Message != "the branch's node refused the front" || tries != 1 {
		t.Fatalf("a node that refused the front: %v after %d tries", err, tries)
	}
}

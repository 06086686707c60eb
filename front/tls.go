package front

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/cluster"
)

// sslRequestCode is the code of Postgres's SSLRequest.
const sslRequestCode = 80877103

// TLSDialer returns a Dialer that reaches nodes with mutual TLS from the cluster
// CA: it asks for TLS as a Postgres client does (SSLRequest), then checks that
// the node's certificate is the cluster's and names the node it meant to reach,
// and shows the front's own, without which a node serves nothing.
func TLSDialer(m *cluster.Member) Dialer {
	d := nodeDialer()
	return func(ctx context.Context, node, addr string) (net.Conn, error) {
		cfg, err := m.DialConfig(node)
		if err != nil {
			return nil, err
		}
		raw, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		if d, ok := ctx.Deadline(); ok {
			raw.SetDeadline(d)
		}
		c, err := startTLS(ctx, raw, cfg)
		if err != nil {
			raw.Close()
			return nil, fmt.Errorf("node %s at %s: %w", node, addr, err)
		}
		raw.SetDeadline(time.Time{})
		return c, nil
	}
}

// startTLS asks the server on raw for TLS and shakes hands.
func startTLS(ctx context.Context, raw net.Conn, cfg *tls.Config) (*tls.Conn, error) {
	var req [8]byte
	binary.BigEndian.PutUint32(req[0:], 8)
	binary.BigEndian.PutUint32(req[4:], sslRequestCode)
	if _, err := raw.Write(req[:]); err != nil {
		return nil, err
	}
	var answer [1]byte
	if _, err := io.ReadFull(raw, answer[:]); err != nil {
		return nil, err
	}
	if answer[0] != 'S' {
		return nil, fmt.Errorf("the node does not speak TLS (answered %q to SSLRequest)", answer[0])
	}
	c := tls.Client(raw, cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

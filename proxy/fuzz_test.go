package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"go.uber.org/zap"
)

// countingReader counts the bytes its reader handed out.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// FuzzStartup feeds arbitrary bytes to the startup framer, checking that it reads
// exactly one packet's bytes (at most 8 when the declared length is invalid: the
// length word and code are read together), and then to the proxy's real startup reader
// (readClientStartup, as handle calls it), checking that every input ends in a
// startup the proxy can forward, a client error with a real SQLSTATE, or the end of
// the input, never in an internal error or a hang.
func FuzzStartup(f *testing.F) {
	const max = 10000
	f.Add(validStartup(f))
	f.Add(append(validStartup(f), 'Q', 0, 0, 0, 5, 'x'))
	f.Add(startupPacket(codeSSL, nil))
	f.Add(startupPacket(codeGSSENC, nil))
	if b, err := (&pgproto3.CancelRequest{ProcessID: 4242, SecretKey: []byte{1, 2, 3, 4}}).Encode(nil); err == nil {
		f.Add(b)
	}
	f.Add(startupPacket(protocolV3, []byte("user\x00u\x00_pq_.x\x00y\x00\x00")))
	f.Add(startupPacket(protocolV3|2, []byte("user\x00u\x00\x00")))           // 3.2
	f.Add(startupPacket(protocolV3|9, []byte("user\x00u\x00")))               // 3.9, no terminator
	f.Add(startupPacket(2<<16, []byte("user\x00u\x00database\x00d\x00\x00"))) // 2.0
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Add([]byte{0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0})
	f.Add(lengthOnly(100 << 10))
	f.Add(lengthOnly(0))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		cr := &countingReader{r: bytes.NewReader(data)}
		code, body, err := readStartup(cr, max)
		if cr.n > len(data) {
			t.Fatalf("consumed %d of %d bytes", cr.n, len(data))
		}
		if len(data) >= 4 {
			declared := binary.BigEndian.Uint32(data)
			if cr.n > minStartup && uint64(cr.n) > uint64(declared) {
				t.Fatalf("consumed %d bytes past a declared length of %d", cr.n, declared)
			}
			if declared < minStartup || declared > max {
				if !errors.Is(err, errStartupLength) || cr.n < 4 || cr.n > minStartup {
					t.Fatalf("declared length %d: err = %v after %d bytes, want errStartupLength after 4 to 8", declared, err, cr.n)
				}
			}
		}
		if err != nil {
			if body != nil {
				t.Fatalf("body %q returned with error %v", body, err)
			}
			return
		}
		declared := binary.BigEndian.Uint32(data)
		if cr.n != int(declared) {
			t.Fatalf("consumed %d bytes, declared length %d", cr.n, declared)
		}
		if len(body) != int(declared)-4 {
			t.Fatalf("len(body) = %d, declared length %d", len(body), declared)
		}
		if !bytes.Equal(body, data[4:declared]) {
			t.Fatalf("body %q is not the packet's bytes %q", body, data[4:declared])
		}
		if code != binary.BigEndian.Uint32(body) {
			t.Fatalf("code %d is not the body's first word", code)
		}

		checkClientStartup(t, data)
	})
}

// checkClientStartup runs the real readClientStartup on data, sent by a client that
// then hangs up.
func checkClientStartup(t *testing.T, data []byte) {
	s, err := New(Config{}, refusingBranches{}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	client, server := net.Pipe()
	defer server.Close()
	server.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		client.Write(data)
		client.Close()
	}()
	go io.Copy(io.Discard, client) // the 'N' answers to SSL and GSS requests
	st, err := s.readClientStartup(server, zap.NewNop())
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("readClientStartup hung on %q", data)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.ErrClosedPipe) {
			return
		}
		if ce := classify(err); ce.id != "" || ce.code == codeInternal {
			t.Fatalf("readClientStartup(%q) = %v: an internal error (XX000) for client input", data, err)
		}
		return
	}
	if st.params == nil {
		return // a cancel request, handled
	}
	if st.version&majorVersion != protocolV3 {
		t.Fatalf("accepted protocol %d.%d", st.version>>16, st.version&0xffff)
	}
	for k := range st.params {
		if strings.HasPrefix(k, "_pq_.") {
			t.Fatalf("protocol option %q left in the parameters", k)
		}
	}
	// What is accepted must re-encode: the proxy forwards these parameters.
	if _, err := (&pgproto3.StartupMessage{ProtocolVersion: protocolV3, Parameters: st.params}).Encode(nil); err != nil {
		t.Fatalf("accepted parameters %q do not re-encode: %v", st.params, err)
	}
}

// refusingBranches is a Branches that refuses everything; readClientStartup never
// calls it.
type refusingBranches struct{}

func (refusingBranches) Acquire(context.Context, router.Route) (Lease, error) {
	return nil, errors.New("not in this test")
}

func (refusingBranches) Roles(context.Context, router.Route) (roles.Set, error) {
	return nil, errors.New("not in this test")
}

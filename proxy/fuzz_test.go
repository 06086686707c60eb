package proxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
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

// FuzzStartup feeds arbitrary bytes to the startup framer and then decodes what it
// returns the way readClientStartup and handleCancel do.
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
			if uint64(cr.n) > uint64(declared) && cr.n > 4 {
				t.Fatalf("consumed %d bytes past a declared length of %d", cr.n, declared)
			}
			if declared < minStartup || declared > max {
				if !errors.Is(err, errStartupLength) || cr.n != 4 {
					t.Fatalf("declared length %d: err = %v after %d bytes, want errStartupLength after 4", declared, err, cr.n)
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

		switch {
		case code == codeCancel:
			var req pgproto3.CancelRequest
			if err := req.Decode(body); err == nil {
				if len(req.SecretKey) != len(body)-8 {
					t.Fatalf("secret key of %d bytes from a %d-byte body", len(req.SecretKey), len(body))
				}
			}
		case code&majorVersion == protocolV3:
			msg := pgproto3.StartupMessage{}
			b := append([]byte(nil), body...)
			binary.BigEndian.PutUint32(b, protocolV3)
			if err := msg.Decode(b); err != nil {
				return
			}
			_ = checkParams(msg.Parameters)
			for k := range msg.Parameters {
				if strings.HasPrefix(k, "_pq_.") {
					delete(msg.Parameters, k)
				}
			}
			// What decodes must re-encode: the proxy forwards these parameters.
			if _, err := (&pgproto3.StartupMessage{ProtocolVersion: code, Parameters: msg.Parameters}).Encode(nil); err != nil {
				t.Fatalf("decoded parameters %q do not re-encode: %v", msg.Parameters, err)
			}
		}
	})
}

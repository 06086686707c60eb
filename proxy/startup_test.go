package proxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// startupPacket frames a startup-phase packet: length word, code, rest.
func startupPacket(code uint32, rest []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(8+len(rest)))
	b = binary.BigEndian.AppendUint32(b, code)
	return append(b, rest...)
}

// lengthOnly is a startup header that declares n bytes and sends nothing more.
func lengthOnly(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func validStartup(t testing.TB) []byte {
	t.Helper()
	b, err := (&pgproto3.StartupMessage{
		ProtocolVersion: pgproto3.ProtocolVersion30,
		Parameters:      map[string]string{"user": "u", "database": "app@feat"},
	}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReadStartup(t *testing.T) {
	t.Parallel()
	startup := validStartup(t)
	cancel, err := (&pgproto3.CancelRequest{ProcessID: 7, SecretKey: []byte{1, 2, 3, 4}}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	const tail = "NEXT"

	tests := []struct {
		name     string
		in       []byte
		max      int
		wantCode uint32
		wantBody []byte // nil: body[4:] is not checked
		wantErr  error  // nil: success expected
		wantLeft int    // bytes left unread in the reader
	}{
		{name: "startup 3.0", in: startup, max: 10000, wantCode: protocolV3, wantBody: startup[4:]},
		{name: "startup 3.0 then more bytes", in: append(append([]byte(nil), startup...), tail...), max: 10000,
			wantCode: protocolV3, wantBody: startup[4:], wantLeft: len(tail)},
		{name: "SSLRequest", in: startupPacket(codeSSL, nil), max: 10000, wantCode: codeSSL,
			wantBody: binary.BigEndian.AppendUint32(nil, codeSSL)},
		{name: "SSLRequest then startup", in: append(startupPacket(codeSSL, nil), startup...), max: 10000,
			wantCode: codeSSL, wantLeft: len(startup)},
		{name: "GSSENCRequest", in: startupPacket(codeGSSENC, nil), max: 10000, wantCode: codeGSSENC},
		{name: "CancelRequest", in: cancel, max: 10000, wantCode: codeCancel, wantBody: cancel[4:]},
		{name: "length exactly 8", in: startupPacket(0x12345678, nil), max: 10000, wantCode: 0x12345678},
		{name: "length exactly max", in: startupPacket(protocolV3, make([]byte, 92)), max: 100, wantCode: protocolV3},
		{name: "empty input", in: nil, max: 10000, wantErr: io.EOF},
		{name: "half a length word", in: []byte{0, 0}, max: 10000, wantErr: io.ErrUnexpectedEOF},
		{name: "length 0", in: append(lengthOnly(0), tail...), max: 10000, wantErr: errStartupLength, wantLeft: len(tail)},
		{name: "length 7", in: append(lengthOnly(7), "abcdefg"...), max: 10000, wantErr: errStartupLength, wantLeft: 7},
		{name: "length max+1", in: append(startupPacket(protocolV3, make([]byte, 93)), tail...), max: 100,
			wantErr: errStartupLength, wantLeft: 97 + len(tail)},
		{name: "100 KB length header", in: lengthOnly(100 << 10), max: 10000, wantErr: errStartupLength},
		{name: "length 0xffffffff", in: lengthOnly(0xffffffff), max: 10000, wantErr: errStartupLength},
		{name: "truncated code", in: append(lengthOnly(8), 0, 3), max: 10000, wantErr: io.ErrUnexpectedEOF},
		{name: "truncated body", in: startup[:len(startup)-1], max: 10000, wantErr: io.ErrUnexpectedEOF},
		{name: "header only", in: lengthOnly(20), max: 10000, wantErr: io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// One byte at a time, so a read that relies on a single Read filling its
			// buffer fails.
			r := bytes.NewReader(tt.in)
			code, body, err := readStartup(iotest.OneByteReader(r), tt.max)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			} else {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if code != tt.wantCode {
					t.Errorf("code = %d, want %d", code, tt.wantCode)
				}
				declared := binary.BigEndian.Uint32(tt.in)
				if len(body) != int(declared)-4 {
					t.Errorf("len(body) = %d, want %d", len(body), declared-4)
				}
				if tt.wantBody != nil && !bytes.Equal(body, tt.wantBody) {
					t.Errorf("body = %q, want %q", body, tt.wantBody)
				}
			}
			if r.Len() != tt.wantLeft {
				t.Errorf("%d bytes left unread, want %d", r.Len(), tt.wantLeft)
			}
		})
	}
}

// TestReadStartupDoesNotWaitForMore checks that a packet is returned as soon as its
// bytes are in, without reading further: the reader fails the test if it is asked
// for more than it was given.
func TestReadStartupDoesNotWaitForMore(t *testing.T) {
	t.Parallel()
	startup := validStartup(t)
	r := &strictReader{t: t, data: startup}
	code, body, err := readStartup(r, DefaultMaxStartupPacket)
	if err != nil || code != protocolV3 || !bytes.Equal(body, startup[4:]) {
		t.Fatalf("readStartup = %d, %q, %v", code, body, err)
	}
}

// TestReadStartupReadCount checks that a packet that arrived whole is read in as few
// reads as its framing allows: a request of 8 bytes in one, any longer packet in two.
func TestReadStartupReadCount(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		in   []byte
		want int
	}{
		{"SSLRequest", startupPacket(codeSSL, nil), 1},
		{"StartupMessage", validStartup(t), 2},
	} {
		r := &strictReader{t: t, data: tt.in}
		if _, _, err := readStartup(r, DefaultMaxStartupPacket); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if r.reads != tt.want {
			t.Errorf("%s: %d reads, want %d", tt.name, r.reads, tt.want)
		}
	}
}

// strictReader serves data and fails the test on any read after it is exhausted,
// standing in for a connection whose next read would block.
type strictReader struct {
	t     *testing.T
	data  []byte
	reads int
}

func (r *strictReader) Read(p []byte) (int, error) {
	r.reads++
	if len(r.data) == 0 {
		r.t.Error("read past the end of the packet")
		return 0, io.EOF
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestReadMessage(t *testing.T) {
	t.Parallel()
	query, err := (&pgproto3.Query{String: "select 1"}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	rfq, err := (&pgproto3.ReadyForQuery{TxStatus: 'I'}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	const tail = "NEXT"
	msg := func(typ byte, n uint32, body string) []byte {
		b := append([]byte{typ}, lengthOnly(n)...)
		return append(b, body...)
	}

	tests := []struct {
		name     string
		in       []byte
		max      int
		wantType byte
		wantMsg  []byte
		wantErr  error
		wantLeft int
	}{
		{name: "query", in: query, max: 1000, wantType: 'Q', wantMsg: query},
		{name: "query then more", in: append(append([]byte(nil), query...), tail...), max: 1000,
			wantType: 'Q', wantMsg: query, wantLeft: len(tail)},
		{name: "ready for query", in: rfq, max: 1000, wantType: 'Z', wantMsg: rfq},
		{name: "empty body", in: msg('S', 4, ""), max: 1000, wantType: 'S', wantMsg: msg('S', 4, "")},
		{name: "length exactly max", in: msg('p', 10, "abcdef"), max: 10, wantType: 'p', wantMsg: msg('p', 10, "abcdef")},
		{name: "empty input", in: nil, max: 1000, wantErr: io.EOF},
		{name: "truncated header", in: []byte{'Q', 0, 0}, max: 1000, wantErr: io.ErrUnexpectedEOF},
		{name: "length 3", in: append(msg('Q', 3, ""), tail...), max: 1000, wantErr: errMessageLength, wantLeft: len(tail)},
		{name: "length 0", in: msg('Q', 0, ""), max: 1000, wantErr: errMessageLength},
		{name: "length max+1", in: msg('p', 11, "abcdefg"), max: 10, wantErr: errMessageLength, wantLeft: 7},
		{name: "length 0xffffffff", in: msg('p', 0xffffffff, ""), max: 1 << 20, wantErr: errMessageLength},
		{name: "truncated body", in: query[:len(query)-1], max: 1000, wantErr: io.ErrUnexpectedEOF},
		{name: "header only", in: msg('Q', 9, ""), max: 1000, wantErr: io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := bytes.NewReader(tt.in)
			typ, got, err := readMessage(iotest.OneByteReader(r), tt.max)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			} else {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if typ != tt.wantType {
					t.Errorf("type = %q, want %q", typ, tt.wantType)
				}
				if !bytes.Equal(got, tt.wantMsg) {
					t.Errorf("msg = %q, want %q", got, tt.wantMsg)
				}
			}
			if r.Len() != tt.wantLeft {
				t.Errorf("%d bytes left unread, want %d", r.Len(), tt.wantLeft)
			}
		})
	}
}

type forwardingLease struct{ Lease }

func (forwardingLease) RouteParams() map[string]string {
	return map[string]string{"pgbranch.source": "s1", "pgbranch.ttl": "1h0m0s"}
}

// A node behind a front is sent the route's parameters with the route made
// explicit (a default branch included) and the lease's pgbranch.* parameters,
// never the client's own pgbranch.* keys (in whatever case); a branch server gets
// the route's.
func TestServerParams(t *testing.T) {
	client := map[string]string{"user": "u", "database": "app", "options": "-c pgbranch.ttl=1h -c work_mem=8MB",
		"application_name": "x", "PGBRANCH.SOURCE": "other"}
	route, err := router.Parse(client, "main")
	if err != nil {
		t.Fatal(err)
	}
	got := serverParams(forwardingLease{}, route)
	if got["database"] != "app@main" || got["pgbranch.source"] != "s1" || got["pgbranch.ttl"] != "1h0m0s" ||
		got["options"] != "-c work_mem=8MB" || got["user"] != "u" || got["application_name"] != "x" || got["PGBRANCH.SOURCE"] != "" {
		t.Fatalf("forwarded params %v", got)
	}
	if route.Params["database"] != "app" {
		t.Fatal("the route's parameters were changed")
	}
	if got := serverParams(nil, route); got["database"] != "app" || got["pgbranch.source"] != "" {
		t.Fatalf("branch server params %v", got)
	}
}

type noticingLease struct{ Lease }

func (noticingLease) Notices() []string { return []string{"made again"} }

// A Noticer lease's notices go to the client as NoticeResponses; other leases
// send none.
func TestNotices(t *testing.T) {
	if b := notices(forwardingLease{}); b != nil {
		t.Fatalf("a lease without notices: %q", b)
	}
	b := notices(noticingLease{})
	var n pgproto3.NoticeResponse
	if len(b) < 5 || b[0] != 'N' || n.Decode(b[5:]) != nil || n.Message != "made again" || n.Severity != "NOTICE" {
		t.Fatalf("notice bytes %q", b)
	}
}

package proxy_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/errs"
	"go.uber.org/zap"
)

func TestLoginErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		extra       string
		noDefault   bool
		acquireErr  error
		wantCode    string
		wantHint    bool
		wantAcquire bool
	}{
		{name: "uppercase branch", extra: "dbname=app@Bad", wantCode: "3D000", wantHint: true},
		{name: "dot-dot branch", extra: "dbname=app@../x", wantCode: "3D000", wantHint: true},
		{name: "empty branch", extra: "dbname=app@", wantCode: "3D000", wantHint: true},
		{name: "empty database", extra: "dbname=@feat", wantCode: "3D000", wantHint: true},
		{name: "no branch and no default", extra: "dbname=app", noDefault: true, wantCode: "3D000", wantHint: true},
		{name: "invalid option value", extra: "dbname=app@feat options='-c pgbranch.ttl=soon'", wantCode: "22023"},
		{name: "unknown option", extra: "dbname=app@feat options='-c pgbranch.nope=1'", wantCode: "22023"},
		{name: "replication", extra: "dbname=app@feat replication=database", wantCode: "0A000"},
		{name: "not ready", extra: "dbname=app@feat", acquireErr: fmt.Errorf("wake branch %q: %w", "feat", errs.ErrNotReady),
			wantCode: "57P03", wantHint: true, wantAcquire: true},
		{name: "catalog unavailable", extra: "dbname=app@feat",
			acquireErr: fmt.Errorf("create branch %q: record creating: %w: dial /secret/run/.s.PGSQL.5432", "feat", errs.ErrCatalogUnavailable),
			wantCode:   "57P03", wantHint: true, wantAcquire: true},
		{name: "node lost", extra: "dbname=app@feat", acquireErr: fmt.Errorf("record new branch: %w: %w", errs.ErrNodeLost, errs.ErrFenced),
			wantCode: "57P03", wantHint: true, wantAcquire: true},
		{name: "fenced", extra: "dbname=app@feat", acquireErr: fmt.Errorf("branch %q: %w", "feat", errs.ErrFenced),
			wantCode: "57P03", wantHint: true, wantAcquire: true},
		{name: "lost", extra: "dbname=app@feat", acquireErr: fmt.Errorf("branch %q: %w", "feat", errs.ErrLost),
			wantCode: "57P03", wantHint: true, wantAcquire: true},
		{name: "not found", extra: "dbname=app@feat", acquireErr: fmt.Errorf("source: %w", errs.ErrNotFound),
			wantCode: "3D000", wantAcquire: true},
		{name: "closed", extra: "dbname=app@feat", acquireErr: errs.ErrClosed, wantCode: "57P01", wantAcquire: true},
		{name: "start failed", extra: "dbname=app@feat", acquireErr: fmt.Errorf("start branch %q: %w: %w", "feat", errs.ErrStartFailed, errors.New("mount failed at /secret/x")),
			wantCode: "58000", wantHint: true, wantAcquire: true},
		{name: "ended", extra: "dbname=app@feat", acquireErr: fmt.Errorf("branch %q: %w", "feat", errs.ErrEnded), wantCode: "57P01", wantHint: true, wantAcquire: true},
		{name: "busy", extra: "dbname=app@feat", acquireErr: errs.ErrBusy, wantCode: "55006", wantAcquire: true},
		{name: "invalid", extra: "dbname=app@feat", acquireErr: errs.ErrInvalid, wantCode: "22023", wantAcquire: true},
		{name: "internal", extra: "dbname=app@feat", acquireErr: errors.New("mount failed at /secret/path"),
			wantCode: "XX000", wantAcquire: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := defaultConfig()
			if tt.noDefault {
				cfg.DefaultBranch = ""
			}
			p, fb, fs := setup(t, cfg, scriptOK, tt.acquireErr)
			_, err := p.connect(t, tt.extra)
			pe := pgError(t, err)
			if pe.Code != tt.wantCode {
				t.Errorf("SQLSTATE = %s (%q), want %s", pe.Code, pe.Message, tt.wantCode)
			}
			if pe.Severity != "FATAL" || pe.Message == "" {
				t.Errorf("severity %q, message %q; want FATAL and a message", pe.Severity, pe.Message)
			}
			if tt.wantHint && pe.Hint == "" {
				t.Errorf("no hint with %q", pe.Message)
			}
			for _, s := range []string{pe.Message, pe.Detail, pe.Hint} {
				if strings.Contains(s, "/secret") || strings.Contains(s, "mount failed") {
					t.Errorf("internal error leaked to the client: %q", s)
				}
			}
			if tt.wantCode == "XX000" || tt.wantCode == "58000" {
				checkErrorID(t, p, pe.Detail)
			} else if pe.Detail != "" {
				t.Errorf("detail %q, want none", pe.Detail)
			}
			if tt.wantAcquire {
				recv(t, fb.routes, "Acquire")
			} else {
				noneYet(t, fb.routes, "Acquire")
			}
			noneYet(t, fs.startups, "startup at the branch server")
			if n := p.srv.Stats.Refused.Load(); n != 1 {
				t.Errorf("Stats.Refused = %d, want 1", n)
			}
			checkRefusedBy(t, p, tt.wantCode)
		})
	}
}

// checkRefusedBy checks that the proxy counted one refused connection, under code.
func checkRefusedBy(t *testing.T, p *testProxy, code string) {
	t.Helper()
	by := p.srv.Stats.RefusedBy()
	if by[code] != 1 {
		t.Errorf("RefusedBy()[%s] = %d, want 1 (%v)", code, by[code], by)
	}
	var sum int64
	for _, n := range by {
		sum += n
	}
	if sum != 1 {
		t.Errorf("RefusedBy() counts %d refusals, want 1 (%v)", sum, by)
	}
}

// A branch server's own refusal, passed on to the client, is counted under its
// SQLSTATE as the proxy's own are: an operator tells a server out of processes or
// connection slots from a failed login by the metric alone.
func TestBackendRefusalCounted(t *testing.T) {
	t.Parallel()
	for script, code := range map[string]string{scriptErrorAfterKey: "53300", scriptForkFailed: "53000", scriptAuthError: "28P01"} {
		t.Run(script, func(t *testing.T) {
			t.Parallel()
			p, _, _ := setup(t, defaultConfig(), script, nil)
			_, err := p.connect(t, "dbname=app@feat")
			if pe := pgError(t, err); pe.Code != code {
				t.Fatalf("SQLSTATE = %s (%q), want %s", pe.Code, pe.Message, code)
			}
			checkRefusedBy(t, p, code)
		})
	}
}

// checkErrorID checks that detail carries an error id that the proxy logged with the
// internal error.
func checkErrorID(t *testing.T, p *testProxy, detail string) {
	t.Helper()
	id, ok := strings.CutPrefix(detail, "error id ")
	if !ok || id == "" {
		t.Fatalf("detail = %q, want %q followed by an id", detail, "error id ")
	}
	for _, e := range p.logs.FilterField(zap.String("error_id", id)).All() {
		if e.Level == zap.ErrorLevel {
			return
		}
	}
	t.Errorf("error id %q not logged at error level; logs: %v", id, p.logs.All())
}

func TestDialFailure(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	ln.Close()
	fb := newFakeBranches(closedAddr, nil)
	p := startProxy(t, defaultConfig(), fb)
	_, err = p.connect(t, "dbname=app@feat")
	pe := pgError(t, err)
	if pe.Code != "57P03" || pe.Hint == "" {
		t.Errorf("SQLSTATE = %s (%q, hint %q), want 57P03 with a hint", pe.Code, pe.Message, pe.Hint)
	}
	if strings.Contains(pe.Message+pe.Detail+pe.Hint, closedAddr) {
		t.Errorf("branch server address leaked to the client: %+v", pe)
	}
	checkErrorID(t, p, pe.Detail)
	lease := fb.lease(t, 0)
	lease.waitReleased(t)
	p.shutdown(within)
	if n := lease.releases.Load(); n != 1 {
		t.Errorf("lease released %d times, want once", n)
	}
}

// garbage is fixed pseudo-random bytes.
func garbage(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestMalformedStartup(t *testing.T) {
	t.Parallel()
	user := "user\x00u\x00database\x00app@feat\x00"
	tests := []struct {
		name       string
		send       []byte
		closeWrite bool // half-close after sending
		wantN      int  // 'N' answers expected before the end
		// want is what ends the connection: "08P01" for that ErrorResponse,
		// "08P01|close" when a reset may eat the ErrorResponse (the proxy leaves
		// unread bytes), "close" for no answer at all.
		want string
	}{
		{name: "protocol 2.0", send: packet(2<<16, user+"\x00"), want: "08P01"},
		{name: "protocol 4.0", send: packet(4<<16, user+"\x00"), want: "08P01"},
		{name: "100 KB length header", send: binary.BigEndian.AppendUint32(nil, 100<<10), want: "08P01"},
		{name: "100 KB length header with some body", send: append(binary.BigEndian.AppendUint32(nil, 100<<10), garbage(1000)...), want: "08P01|close"},
		{name: "length 0xffffffff", send: []byte{0xff, 0xff, 0xff, 0xff}, want: "08P01"},
		{name: "length below 8", send: []byte{0, 0, 0, 4}, want: "08P01"},
		{name: "HTTP request", send: []byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"), want: "08P01|close"},
		{name: "random garbage", send: garbage(300), want: "08P01|close"},
		{name: "unknown request code", send: packet(1234<<16|1234, ""), want: "08P01"},
		{name: "second SSLRequest", send: append(packet(codeSSL, ""), packet(codeSSL, "")...), wantN: 1, want: "08P01"},
		{name: "second GSSENCRequest", send: append(packet(codeGSSENC, ""), packet(codeGSSENC, "")...), wantN: 1, want: "08P01"},
		{name: "SSLRequest with a body", send: packet(codeSSL, "xxxx"), want: "08P01"},
		{name: "startup without terminator", send: packet(protocol30, user), want: "08P01"},
		{name: "startup with odd strings", send: packet(protocol30, "user\x00u\x00database\x00"), want: "08P01"},
		{name: "startup without user", send: packet(protocol30, "database\x00app@feat\x00\x00"), want: "28000"},
		{name: "truncated startup", send: packet(protocol30, user+"\x00")[:20], closeWrite: true, want: "close"},
		{name: "cancel request too short", send: packet(codeCancel, "\x00\x00\x10\x92"), want: "close"},
		{name: "cancel request too long", send: packet(codeCancel, string(garbage(300))), want: "close"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, fb, fs := setup(t, defaultConfig(), scriptOK, nil)
			c := p.dial(t)
			if _, err := c.Write(tt.send); err != nil {
				t.Fatal(err)
			}
			if tt.closeWrite {
				if err := c.(*net.TCPConn).CloseWrite(); err != nil {
					t.Fatal(err)
				}
			}
			b := readUntilClosed(t, c)
			for range tt.wantN {
				if len(b) == 0 || b[0] != 'N' {
					t.Fatalf("got %q, want 'N' first", b)
				}
				b = b[1:]
			}
			switch {
			case tt.want == "close" && len(b) != 0:
				t.Errorf("got %q, want the connection closed without an answer", b)
			case tt.want == "08P01" || tt.want == "08P01|close" && len(b) != 0:
				er := parseError(t, b)
				if er.Code != "08P01" || er.Severity != "FATAL" {
					t.Errorf("got %s %s %q, want FATAL 08P01", er.Severity, er.Code, er.Message)
				}
			}
			noneYet(t, fb.routes, "Acquire")
			noneYet(t, fs.startups, "startup at the branch server")
			noneYet(t, fs.cancels, "cancel request at the branch server")
		})
	}
}

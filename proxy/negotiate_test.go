package proxy_test

import (
	"bytes"
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

func TestEncryptionRequestsRefused(t *testing.T) {
	t.Parallel()
	t.Run("pgconn sslmode=prefer", func(t *testing.T) {
		t.Parallel()
		p, _, _ := setup(t, defaultConfig(), scriptOK, nil)
		conn := p.mustConnect(t, "dbname=app@feat sslmode=prefer")
		query(t, conn)
	})
	requests := []struct {
		name  string
		codes []uint32
	}{
		{"SSLRequest", []uint32{codeSSL}},
		{"GSSENCRequest", []uint32{codeGSSENC}},
		{"GSSENCRequest then SSLRequest", []uint32{codeGSSENC, codeSSL}},
	}
	for _, tt := range requests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, fb, _ := setup(t, defaultConfig(), scriptOK, nil)
			c := p.dial(t)
			c.SetReadDeadline(time.Now().Add(within))
			for _, code := range tt.codes {
				if _, err := c.Write(packet(code, "")); err != nil {
					t.Fatal(err)
				}
				var one [1]byte
				if _, err := io.ReadFull(c, one[:]); err != nil || one[0] != 'N' {
					t.Fatalf("answer to request %d = %q, %v; want 'N'", code, one[:], err)
				}
			}
			res := rawLogin(t, c, pgproto3.ProtocolVersion30, map[string]string{"user": "u", "database": "app@feat"})
			if res.err != nil || res.key == nil || !res.authOK {
				t.Fatalf("login after refused encryption: %+v", res)
			}
			recv(t, fb.routes, "Acquire")
		})
	}
}

func TestProtocolNegotiation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		version       uint32
		params        map[string]string
		wantNegotiate *pgproto3.NegotiateProtocolVersion
		wantSecretLen int
	}{
		{name: "3.0", version: 3 << 16, wantSecretLen: 4},
		{name: "3.2", version: 3<<16 | 2, wantSecretLen: 32},
		{name: "3.1", version: 3<<16 | 1, wantSecretLen: 4,
			wantNegotiate: &pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0}},
		{name: "3.7", version: 3<<16 | 7, wantSecretLen: 32,
			wantNegotiate: &pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 2}},
		{name: "_pq_ option", version: 3 << 16, params: map[string]string{"_pq_.compression": "on"}, wantSecretLen: 4,
			wantNegotiate: &pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0, UnrecognizedOptions: []string{"_pq_.compression"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, _, fs := setup(t, defaultConfig(), scriptOK, nil)
			params := map[string]string{"user": "u", "database": "app@feat"}
			for k, v := range tt.params {
				params[k] = v
			}
			res := rawLogin(t, p.dial(t), tt.version, params)
			if res.err != nil || !res.authOK || res.key == nil {
				t.Fatalf("login: %+v", res)
			}
			if tt.wantNegotiate == nil && res.negotiate != nil {
				t.Errorf("got NegotiateProtocolVersion %+v, want none", res.negotiate)
			} else if tt.wantNegotiate != nil && (res.negotiate == nil ||
				res.negotiate.NewestMinorProtocol != tt.wantNegotiate.NewestMinorProtocol ||
				!slices.Equal(res.negotiate.UnrecognizedOptions, tt.wantNegotiate.UnrecognizedOptions)) {
				t.Errorf("got NegotiateProtocolVersion %+v, want %+v", res.negotiate, tt.wantNegotiate)
			}
			if len(res.key.SecretKey) != tt.wantSecretLen {
				t.Errorf("cancel key secret of %d bytes, want %d", len(res.key.SecretKey), tt.wantSecretLen)
			}
			checkBackendStartup(t, recv(t, fs.startups, "startup at the branch server"), "app", "")
			p.sendCancel(t, res.key.ProcessID, res.key.SecretKey)
			got := recv(t, fs.cancels, "cancel request at the branch server")
			if got.ProcessID != backendPID || !bytes.Equal(got.SecretKey, backendSecret) {
				t.Errorf("branch server got cancel key %d/%v, want %d/%v", got.ProcessID, got.SecretKey, backendPID, backendSecret)
			}
		})
	}
	t.Run("pgconn 3.2", func(t *testing.T) {
		t.Parallel()
		p, _, fs := setup(t, defaultConfig(), scriptOK, nil)
		conn := p.mustConnect(t, "dbname=app@feat min_protocol_version=3.2 max_protocol_version=3.2")
		if len(conn.SecretKey()) != 32 {
			t.Errorf("cancel key secret of %d bytes, want 32", len(conn.SecretKey()))
		}
		query(t, conn)
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		if err := conn.CancelRequest(ctx); err != nil {
			t.Fatal(err)
		}
		if got := recv(t, fs.cancels, "cancel request at the branch server"); got.ProcessID != backendPID || !bytes.Equal(got.SecretKey, backendSecret) {
			t.Errorf("branch server got cancel key %d/%v, want %d/%v", got.ProcessID, got.SecretKey, backendPID, backendSecret)
		}
	})
}

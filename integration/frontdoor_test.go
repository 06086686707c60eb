package integration

import (
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

func TestConnectionCaps(t *testing.T) {
	s := startServer(t, newStateDir(t), "--max-client-conns", "3", "--max-sessions", "2")
	s.seedSQL("app", lifecycleSQL)
	a := s.connect(t, "app@cap")
	b := s.connect(t, "app@cap")
	if _, err := s.connectErr("app@cap"); pgCode(err) != "53300" || !strings.Contains(err.Error(), "too many sessions on this branch") {
		t.Fatalf("third session on a branch with --max-sessions 2: %v", err)
	}
	// The refused connection is counted until the proxy has closed it.
	eventually(t, 5*time.Second, "refused connection closed", func() bool {
		return metricValue(t, s.metrics(t), "pgbranch_proxy_connections_active") == 2
	})
	c := s.connect(t, "app@other")
	if _, err := s.connectErr("app@fourth"); pgCode(err) != "53300" || !strings.Contains(err.Error(), "too many clients") {
		t.Fatalf("fourth client with --max-client-conns 3: %v", err)
	}
	a.Close(t.Context())
	b.Close(t.Context())
	c.Close(t.Context())
	eventually(t, 5*time.Second, "a client gets in once others left", func() bool {
		_, err := s.connectErr("app@cap")
		return err == nil
	})
}

// startupPacket frames a startup packet for a protocol version.
func startupPacket(version uint32, params ...string) []byte {
	body := binary.BigEndian.AppendUint32(nil, version)
	for _, p := range params {
		body = append(body, p...)
		body = append(body, 0)
	}
	body = append(body, 0)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body)+4)), body...)
}

func TestProtocolNegotiation(t *testing.T) {
	s := startServer(t, newStateDir(t))
	s.seedSQL("app", lifecycleSQL)
	for _, tc := range []struct {
		name    string
		version uint32
		extra   []string
		want    uint32
		options []string
	}{
		{"3.5 is answered 3.2", 3<<16 | 5, nil, 2, nil},
		{"3.1 is answered 3.0", 3<<16 | 1, nil, 0, nil},
		{"_pq_ options are listed", 3 << 16, []string{"_pq_.compression", "zstd"}, 0, []string{"_pq_.compression"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", s.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			params := append([]string{"user", "postgres", "database", "app@neg"}, tc.extra...)
			conn.Write(startupPacket(tc.version, params...))
			fe := pgproto3.NewFrontend(conn, conn)
			msg, err := fe.Receive()
			if err != nil {
				t.Fatal(err)
			}
			npv, ok := msg.(*pgproto3.NegotiateProtocolVersion)
			if !ok {
				t.Fatalf("first message %T, want NegotiateProtocolVersion", msg)
			}
			if npv.NewestMinorProtocol != tc.want || strings.Join(npv.UnrecognizedOptions, ",") != strings.Join(tc.options, ",") {
				t.Errorf("negotiated %+v", npv)
			}
			for {
				msg, err := fe.Receive()
				if err != nil {
					t.Fatal(err)
				}
				if k, ok := msg.(*pgproto3.BackendKeyData); ok {
					wantLen := 4
					if tc.want == 2 {
						wantLen = 32
					}
					if len(k.SecretKey) != wantLen {
						t.Errorf("cancel key of %d bytes, want %d", len(k.SecretKey), wantLen)
					}
				}
				if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
					break
				}
			}
		})
	}
	t.Run("replication refused", func(t *testing.T) {
		conn, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		conn.Write(startupPacket(3<<16, "user", "postgres", "database", "app@neg", "replication", "database"))
		b, _ := io.ReadAll(conn)
		if !strings.Contains(string(b), "0A000") {
			t.Errorf("replication connection answered %q", b)
		}
	})
}

func TestAdminOverTCP(t *testing.T) {
	addr := freeAddr(t)
	token := "a-long-enough-admin-token"
	s := startServer(t, newStateDir(t), "--admin-listen", addr, "--admin-token", token)
	_ = s
	get := func(path, auth string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("/healthz", ""); code != 200 {
		t.Errorf("/healthz without token: %d", code)
	}
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + token + "x", token} {
		if code := get("/v1/branches", auth); code != 401 {
			t.Errorf("/v1/branches with %q: %d, want 401", auth, code)
		}
	}
	if code := get("/v1/branches", "Bearer "+token); code != 200 {
		t.Errorf("/v1/branches with the token: %d", code)
	}
	if code := get("/metrics", "Bearer "+token); code != 200 {
		t.Errorf("/metrics with the token: %d", code)
	}
}

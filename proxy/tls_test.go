package proxy_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"fmt"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
)

// selfSigned returns a server TLS configuration with a throwaway certificate.
func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// recordSizes reads the TLS records a client receives off its socket, after the
// one-byte answer to SSLRequest, and keeps the largest application data record.
type recordSizes struct {
	net.Conn
	mu      sync.Mutex
	skip    int     // bytes before the first record
	hdr     [5]byte // the record header being read
	hdrN    int
	remain  int // body bytes of the current record still to come
	largest int
}

func (r *recordSizes) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	for b := p[:n]; len(b) > 0; {
		switch {
		case r.skip > 0:
			k := min(r.skip, len(b))
			r.skip -= k
			b = b[k:]
		case r.remain > 0:
			k := min(r.remain, len(b))
			r.remain -= k
			b = b[k:]
		default:
			k := copy(r.hdr[r.hdrN:], b)
			r.hdrN += k
			b = b[k:]
			if r.hdrN == len(r.hdr) {
				r.hdrN = 0
				r.remain = int(binary.BigEndian.Uint16(r.hdr[3:]))
				if r.hdr[0] == 23 { // application data
					r.largest = max(r.largest, r.remain)
				}
			}
		}
	}
	return n, err
}

// TestTLSRecordsAtMost8K: the proxy writes a TLS client's data in records of at
// most 8 KB, as Postgres does. libpq reads 8 KB or more at a time; the rest of a
// larger record stays inside OpenSSL, unseen by a client waiting for its socket
// (psycopg 3 hung in COPY TO STDOUT over TLS once the server had sent it all).
func TestTLSRecordsAtMost8K(t *testing.T) {
	t.Parallel()
	cfg := reuseConfig(false) // TLS sessions are relayed by goroutines whatever the relay
	cfg.TLS, cfg.TLSMode = selfSigned(t), proxy.TLSAllow
	p, _, _ := setup(t, cfg, scriptOK, nil)
	pc, err := pgconn.ParseConfig(fmt.Sprintf("host=127.0.0.1 port=%s user=u dbname=app@feat sslmode=require", p.port))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordSizes{skip: 1}
	pc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		rec.Conn = c
		return rec, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	res, err := conn.Exec(ctx, queryBig).ReadAll()
	if err != nil || len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0][0]) != bigValue {
		t.Fatalf("%s: %v", queryBig, err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// Ciphertext: 8 KB of data, and the record's nonce, tag and type.
	if rec.largest > 8192+64 {
		t.Errorf("largest TLS record %d bytes, want at most 8 KB of data", rec.largest)
	}
}

package proxy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/proxy"
)

// A unix socket client is exempt from --tls-mode require, unless the server asks
// every client for a certificate (a node's fronts): then it must come over TLS
// too, and a plaintext login is refused with 28000.
func TestUnixSocketTLSRequire(t *testing.T) {
	for _, tc := range []struct {
		name    string
		auth    tls.ClientAuthType
		refused bool
	}{{"NoClientCerts", tls.NoClientCert, false}, {"ClientCertsRequired", tls.RequireAndVerifyClientCert, true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.Auth = proxy.AuthTrust
			cfg.TLS = selfSigned(t)
			cfg.TLS.ClientAuth, cfg.TLS.ClientCAs = tc.auth, x509.NewCertPool()
			cfg.TLSMode = proxy.TLSRequire
			p, _, _ := setup(t, cfg, "", nil)
			ln, err := proxy.ListenUnix(t.TempDir(), 5432)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- p.srv.Serve(ctx, ln) }()
			defer func() { cancel(); <-served }()
			c, err := net.Dial("unix", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			res := rawLogin(t, c, protocol30, map[string]string{"user": "u", "database": "db@main"})
			if refused := res.err != nil; refused != tc.refused || refused && res.err.Code != "28000" {
				t.Errorf("plaintext login over the unix socket: %+v, want refused %v (28000)", res.err, tc.refused)
			}
		})
	}
}

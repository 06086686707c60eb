package main

import (
	"context"
	"fmt"
	"net"

	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"go.uber.org/zap"
)

// listenClients opens the proxy's listeners: --listen first, then the unix socket
// of --unix-socket-dir, named after the port --listen got.
func listenClients(ctx context.Context, f *serveFlags) ([]net.Listener, error) {
	ln, err := proxy.Listen(ctx, f.listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", f.listen, err)
	}
	if f.unixSocketDir == "" {
		return []net.Listener{ln}, nil
	}
	uln, err := proxy.ListenUnix(f.unixSocketDir, ln.Addr().(*net.TCPAddr).Port)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("--unix-socket-dir: %w", err)
	}
	return []net.Listener{ln, uln}, nil
}

// unixSocketField names the unix socket among lns for the log, if there is one.
func unixSocketField(lns []net.Listener) zap.Field {
	for _, ln := range lns {
		if a, ok := ln.Addr().(*net.UnixAddr); ok {
			return zap.String("unix_socket", a.Name)
		}
	}
	return zap.Skip()
}

// servingFields say, for the ready line, how clients are taken (authentication,
// relay) and where else serve answers (--metrics-listen, --admin-listen), so that
// an operator reads what the flags, PGBRANCH_* and the config file came to.
func servingFields(f *serveFlags) []zap.Field {
	fields := []zap.Field{zap.String("auth", f.auth), zap.String("relay", f.relay)}
	if f.metricsListen != "" {
		fields = append(fields, zap.String("metrics", f.metricsListen))
	}
	if f.adminListen != "" {
		fields = append(fields, zap.String("admin_listen", f.adminListen))
	}
	return fields
}

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

package proxy

import (
	"context"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Client keepalive: what Go sets on every accepted TCP connection by default (probes
// after 15 s idle, every 15 s, 9 of them).
const (
	keepAliveIdleSecs     = 15
	keepAliveIntervalSecs = 15
	keepAliveCount        = 9
)

// deferAcceptSecs is how long the kernel holds a new connection that has sent
// nothing before it is accepted anyway (TCP_DEFER_ACCEPT; PgBouncer's
// tcp_defer_accept sets it on Linux too). A Postgres client speaks first, so its
// connection is accepted with its first packet already there, and its handler
// reads it at once instead of parking until it comes.
const deferAcceptSecs = 10

// Listen listens for clients on a TCP address. Keepalive is set once on the
// listening socket, whose accepted connections inherit it on Linux, instead of with
// four system calls on every accepted connection as net.Listen does: the same probes,
// for less work per connection. Connections are accepted once their first bytes
// have come (see deferAcceptSecs).
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	lc := net.ListenConfig{KeepAlive: -1, Control: setListenKeepAlive}
	return lc.Listen(ctx, "tcp", addr)
}

func setListenKeepAlive(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		for _, o := range []struct{ level, opt, val int }{
			{unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
			{unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, keepAliveIdleSecs},
			{unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, keepAliveIntervalSecs},
			{unix.IPPROTO_TCP, unix.TCP_KEEPCNT, keepAliveCount},
			{unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, deferAcceptSecs},
		} {
			if serr = unix.SetsockoptInt(int(fd), o.level, o.opt, o.val); serr != nil {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return serr
}

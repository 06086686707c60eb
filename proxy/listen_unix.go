package proxy

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// UnixSocketPath is where a server listening on dir and port puts its socket, by
// the name libpq looks for: host=dir port=port.
func UnixSocketPath(dir string, port int) string {
	return filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port))
}

// ListenUnix listens for clients on a unix socket in dir, named as Postgres names
// its own (see UnixSocketPath), that every local user may connect to: who may log
// in is the proxy's authentication's to decide, and who may reach the socket,
// dir's permissions'. A socket file left by a server that is gone is replaced; one
// a running server answers on is not. Closing the listener removes the file.
func ListenUnix(dir string, port int) (net.Listener, error) {
	path := UnixSocketPath(dir, port)
	if len(path) >= 108 {
		return nil, fmt.Errorf("unix socket path %s is too long (at most 107 bytes)", path)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o777); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// removeStaleSocket removes the socket file at path unless a server accepts
// connections on it.
func removeStaleSocket(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("another server is listening on %s", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.Remove(path)
}

// localConn reports whether c came through a unix socket: a client on this host,
// whom TLS would not protect from anything.
func localConn(c net.Conn) bool {
	_, ok := c.(*net.UnixConn)
	return ok
}

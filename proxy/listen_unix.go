package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// UnixSocketPath is where a server listening on dir and port puts its socket, by
// the name libpq looks for: host=dir port=port.
func UnixSocketPath(dir string, port int) string {
	return filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port))
}

// ListenUnix listens for clients on a unix socket in dir, named as Postgres names
// its own (see UnixSocketPath), that every local user may connect to: who may log
// in is the proxy's authentication's to decide, and who may reach the socket,
// dir's permissions'. Like a postmaster it holds a lock file beside the socket
// (.s.PGSQL.PORT.lock, its PID on the first line, so that a Postgres started on the
// same directory and port refuses to take the socket over), and replaces a socket
// and lock file a process that is gone left. Closing the listener removes both.
func ListenUnix(dir string, port int) (net.Listener, error) {
	path := UnixSocketPath(dir, port)
	if len(path) >= 108 {
		return nil, fmt.Errorf("unix socket path %s is too long (at most 107 bytes)", path)
	}
	lock, err := lockSocket(path + ".lock")
	if err != nil {
		return nil, err
	}
	ln, err := listenSocket(path)
	if err != nil {
		os.Remove(lock.Name())
		lock.Close()
		return nil, err
	}
	return &unixListener{UnixListener: ln, lock: lock}, nil
}

// listenSocket binds path, replacing a socket file nobody accepts on, and opens it
// to every local user.
func listenSocket(path string) (*net.UnixListener, error) {
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// Chmod follows a symbolic link: make sure path is still the socket bound.
	if st, err := os.Lstat(path); err != nil || st.Mode()&os.ModeSocket == 0 {
		ln.Close()
		return nil, fmt.Errorf("%s changed while it was being bound", path)
	}
	if err := os.Chmod(path, 0o777); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// unixListener is a unix socket listener that holds its lock file until closed.
type unixListener struct {
	*net.UnixListener
	lock *os.File
	once sync.Once
}

func (l *unixListener) Close() error {
	err := l.UnixListener.Close() // removes the socket file
	l.once.Do(func() {
		os.Remove(l.lock.Name())
		l.lock.Close()
	})
	return err
}

// lockSocket takes the lock file of a socket: an flock against another
// pgbranchproxy, and the PID of a running process on its first line (a
// postmaster's) against a Postgres, which takes no flock. It writes this
// process's PID there.
func lockSocket(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another pgbranchproxy holds %s", path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err == nil {
		first, _, _ := strings.Cut(string(b), "\n")
		if pid, perr := strconv.Atoi(strings.TrimSpace(first)); perr == nil && pid > 0 && pid != os.Getpid() && alive(pid) {
			err = fmt.Errorf("%s names process %d, which is running: is a Postgres server using the socket? (remove the file if not)", path, pid)
		}
	}
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// alive reports whether process pid runs. A zombie does not: a killed serve stays
// one until its parent, or an init that reaps slowly, waits for it, and the serve
// restarted meanwhile must not take it for a Postgres still on the socket.
func alive(pid int) bool {
	err := unix.Kill(pid, 0)
	if err != nil && !errors.Is(err, unix.EPERM) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...: comm may hold spaces and parentheses, the state follows the last ')'.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		switch stat[i+2] {
		case 'Z', 'X':
			return false
		}
	}
	return true
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

package proxy

import (
	"net"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// failures counts failed logins per client address in a sliding window. An address
// with limit failures in the window is refused until the window passes. A failure
// that retries the one before it over the other transport counts with it (see
// retryWindow). The map is bounded: the oldest entries go first when it is full.
// Safe for concurrent use.
type failures struct {
	mu      sync.Mutex
	window  time.Duration
	limit   int
	max     int
	entries map[string]*failureEntry
}

type failureEntry struct {
	count int
	since time.Time
	last  failedLogin // the latest failure that counted, while its retry may come
}

// failedLogin is one failed login: whose, over TLS or not, and when.
type failedLogin struct {
	user string
	tls  bool
	at   time.Time
}

// retryWindow is how soon after a failed login a failure of the same user from the
// same address over the other transport is taken for the same attempt, and not
// counted again: libpq with sslmode=prefer (its default) tries a login the server
// refused over TLS once more without it, at once, and with sslmode=allow one
// refused without TLS once more over it.
const retryWindow = 5 * time.Second

func newFailures(limit int, window time.Duration) *failures {
	return &failures{window: window, limit: limit, max: 65536, entries: map[string]*failureEntry{}}
}

// clientHost is what failed logins are counted by: the client's IP address, or
// on a unix socket its OS user ("local uid 1000"), else "local".
func clientHost(c net.Conn) string {
	if uc, ok := c.(*net.UnixConn); ok {
		if uid, ok := peerUID(uc); ok {
			return "local uid " + strconv.Itoa(uid)
		}
	}
	return hostOf(c.RemoteAddr())
}

// peerUID is the OS user of the process at the other end of c (SO_PEERCRED).
func peerUID(c *net.UnixConn) (int, bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, false
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil || cerr != nil {
		return 0, false
	}
	return int(cred.Uid), true
}

func hostOf(addr net.Addr) string {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case *net.UnixAddr, nil:
		return "local" // every client of the unix socket: one host
	}
	h, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return h
}

// blocked reports whether host has used up its failed attempts.
func (f *failures) blocked(host string, now time.Time) bool {
	if f == nil || f.limit <= 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.entries[host]
	if e == nil {
		return false
	}
	if now.Sub(e.since) > f.window {
		delete(f.entries, host)
		return false
	}
	return e.count >= f.limit
}

// fail records a failed login of user from host, over TLS or not.
func (f *failures) fail(host, user string, tls bool, now time.Time) {
	if f == nil || f.limit <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.entries[host]
	if e == nil || now.Sub(e.since) > f.window {
		if len(f.entries) >= f.max {
			f.evictOldest()
		}
		e = &failureEntry{since: now}
		f.entries[host] = e
	}
	if l := e.last; !l.at.IsZero() && l.user == user && l.tls != tls && now.Sub(l.at) <= retryWindow {
		e.last = failedLogin{} // the retry of l: one per failure
		return
	}
	e.count++
	e.last = failedLogin{user: user, tls: tls, at: now}
}

func (f *failures) evictOldest() {
	var oldest string
	var at time.Time
	for h, e := range f.entries {
		if oldest == "" || e.since.Before(at) {
			oldest, at = h, e.since
		}
	}
	delete(f.entries, oldest)
}

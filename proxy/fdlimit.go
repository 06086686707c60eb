package proxy

import (
	"math"

	"golang.org/x/sys/unix"
)

// clientConnsFor is the default cap on client connections for a process that may
// have nofile files open: a quarter of them. A client costs one descriptor while it
// logs in and two once its session runs (its socket and its server's), so clients
// alone, logged in or not, can never take more than half: the rest stays for what
// the server does besides (parked server sessions, branch servers' logs and
// processes, the catalog, the admin socket, starting a server). Without a cap,
// clients that connect and never finish logging in (each held for the start-up
// timeout) take every descriptor, and then a session handed to the relay, a branch
// start and the admin socket fail with "too many open files".
func clientConnsFor(nofile uint64) int {
	return int(min(max(nofile/4, 1), math.MaxInt32))
}

// openFileLimit returns the process's limit on open files (the soft one, which
// the Go runtime raises to the hard one at start).
func openFileLimit() uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return math.MaxUint64 // no cap can be derived
	}
	return rl.Cur
}

package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// The kernel relay's queue toward a server cannot be read directly: a redirected
// packet waits in a list of the server socket's that no interface reports, and it
// left its source socket's receive accounting when the program ran. But until the
// kernel's worker has sent it, the packet holds a reference on the socket it came
// from, and /proc/net/tcp shows every TCP socket's reference count. A source's
// count above what it was while nothing was queued is so the number of its
// packets still waiting, give or take the references TCP's timers hold while they
// are pending (delayed ACK, retransmit), which timerRefs allows for.

// timerRefs bounds the references a TCP socket's pending timers hold beyond those
// counted in its base.
const timerRefs = 2

// socketInode returns the inode of socket fd, the key /proc/net/tcp lists it by.
func socketInode(fd int) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("socket inode: %w", err)
	}
	return st.Ino, nil
}

// socketRefs returns the kernel reference counts of the TCP sockets with the
// given inodes, in the same order, read from /proc/self/net/tcp and tcp6 in one
// pass. The pass costs about a microsecond per TCP socket of the namespace, so
// callers batch it.
func socketRefs(inodes ...uint64) ([]int, error) {
	want := make(map[string]int, len(inodes))
	for i, ino := range inodes {
		want[strconv.FormatUint(ino, 10)] = i
	}
	refs := make([]int, len(inodes))
	found := 0
	for _, path := range []string{"/proc/self/net/tcp6", "/proc/self/net/tcp"} {
		n, err := scanRefs(path, want, refs)
		if err != nil {
			return nil, err
		}
		if found += n; found == len(want) {
			return refs, nil
		}
	}
	return nil, fmt.Errorf("%d of %d sockets not in /proc/net/tcp", len(want)-found, len(want))
}

// scanRefs fills refs[want[inode]] for the sockets of one /proc/net/tcp file.
func scanRefs(path string, want map[string]int, refs []int) (int, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local remote st queues timer retransmits uid timeout inode refcount ...
		fields := bytes.Fields(sc.Bytes())
		if len(fields) < 11 {
			continue
		}
		i, ok := want[string(fields[9])]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(string(fields[10]))
		if err != nil {
			return found, fmt.Errorf("%s: reference count %q", path, fields[10])
		}
		refs[i] = n
		if found++; found == len(want) {
			break
		}
	}
	return found, sc.Err()
}

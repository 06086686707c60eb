package proxy

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The pump's loop makes its system calls without telling the scheduler (raw
// calls): its sockets are non-blocking, and its epoll_wait is a wait the loop's
// goroutine would otherwise do parked. It then keeps its P, and no other thread
// has to take that P over at every wait; a signal (preemption, GC) interrupts the
// wait with EINTR and the goroutine yields at its next call. Only with more than one
// P, so that the pump never holds the last one.

func rawRead(fd int, p []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func rawWrite(fd int, p []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func rawEpollWait(epfd int, events []unix.EpollEvent, msec int) (int, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(msec), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

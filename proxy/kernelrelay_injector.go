package proxy

import (
	"fmt"
	"net"

	"github.com/pgbranchproxy/pgbranchproxy/proxy/sockmap"
	"golang.org/x/sys/unix"
)

// maxIdleInjectors bounds the injectors kept between sessions.
const maxIdleInjectors = 64

// An injector is a loopback TCP connection whose receiving end is in the TCP map
// (sockmap.Injector): what the proxy writes on w reaches the server of the session
// using it behind what the kernel queued for that server. Connecting one costs a
// dial, an accept and map updates, so sessions that needed one hand it back for
// the next.
type injector struct {
	w, r int
	sm   *sockmap.Injector
	ino  uint64 // r's inode
	base int    // r's reference count with nothing queued
}

// takeInjector returns an idle injector, or connects a new one.
func (k *kernelRelay) takeInjector() (*injector, error) {
	k.injMu.Lock()
	defer k.injMu.Unlock()
	if n := len(k.injPool); n > 0 {
		in := k.injPool[n-1]
		k.injPool = k.injPool[:n-1]
		return in, nil
	}
	w, err := net.DialTCP("tcp", nil, k.injLn.Addr().(*net.TCPAddr))
	if err != nil {
		return nil, fmt.Errorf("injector: %w", err)
	}
	defer w.Close()
	r, err := k.injLn.AcceptTCP()
	if err != nil {
		return nil, fmt.Errorf("injector: %w", err)
	}
	defer r.Close()
	w.SetNoDelay(true)
	in := &injector{w: -1, r: -1}
	if in.w, err = dupSocket(w); err == nil {
		in.r, err = dupSocket(r)
	}
	if err == nil {
		in.sm, err = k.sm.NewInjector(in.r)
	}
	if err == nil {
		in.ino, err = socketInode(in.r)
	}
	if err == nil {
		// Nothing was written to it yet: nothing of it is queued.
		var refs []int
		if refs, err = socketRefs(in.ino); err == nil {
			in.base = refs[0]
		}
	}
	if err != nil {
		in.close()
		return nil, err
	}
	return in, nil
}

// releaseInjector keeps a session's injector for the next session when every byte
// written to it reached its server's queue (clean), else closes it.
func (k *kernelRelay) releaseInjector(in *injector, clean bool) {
	k.injMu.Lock()
	if clean && len(k.injPool) < maxIdleInjectors {
		k.injPool = append(k.injPool, in)
		k.injMu.Unlock()
		return
	}
	k.injMu.Unlock()
	k.dropInjector(in)
}

func (k *kernelRelay) dropInjector(in *injector) {
	if in.sm != nil {
		k.sm.DropInjector(in.sm)
	}
	in.close()
}

// dropInjectors closes the idle injectors (when the relay stops).
func (k *kernelRelay) dropInjectors() {
	k.injMu.Lock()
	pool := k.injPool
	k.injPool = nil
	k.injMu.Unlock()
	for _, in := range pool {
		k.dropInjector(in)
	}
}

func (in *injector) close() {
	for _, fd := range []int{in.w, in.r} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

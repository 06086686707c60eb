package proxy

import (
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/proxy/sockmap"
	"golang.org/x/sys/unix"
)

// The queue toward the server. The client's packets redirected to the server, and
// the proxy's own sent through an injector, wait in one list of the server
// socket's for a kernel worker that sends them on in order. The proxy cannot read
// that list, but each packet in it holds a reference on its source socket until
// sent (see sockrefs.go), so the list's length is the sources' reference counts
// above their bases.
//
// Order toward the server rests on that list alone, never on timing: while
// nothing was ever queued for the server the proxy writes to the server's socket
// directly; once something was, everything the proxy sends goes through the
// injector, behind it. And once the proxy has had to forward client bytes in the
// middle of a session (the queue passed its cap), the client's direction stays
// handed to the proxy for the rest of the session (clientHeld): the client's
// packets could otherwise overtake, in the list, an injected packet whose
// program has run but which the kernel has not queued yet.

// queuedEver tells whether anything was ever queued for the server. Called with
// bytes handed over and not yet acknowledged (or with the client held), when the
// program redirects nothing, so the answer cannot change under the caller.
func (ks *ksession) queuedEver() bool {
	return ks.inj != nil || ks.sm.Slot(sockmap.ToServer).Bytes != 0
}

// serverQueue returns the packets still waiting in the kernel for the server,
// give or take the references of pending TCP timers.
func (ks *ksession) serverQueue() (int, error) {
	fds, base := []int{ks.cfd}, []int{ks.cref}
	if ks.inj != nil {
		fds, base = append(fds, ks.inj.r), append(base, ks.iref)
	}
	refs, err := socketRefs(fds...)
	if err != nil {
		return 0, err
	}
	q := 0
	for i := range refs {
		q += max(refs[i]-base[i], 0)
	}
	return q, nil
}

// queueCap is the queue length, in packets, past which the proxy stops taking
// client bytes in: a direction's byte backlog in full-sized packets.
func (k *kernelRelay) queueCap() int { return max(8, int(k.backlog>>16)) }

// heldRounds bounds the rounds relayClientHeld forwards before it lets the
// session's loop look at its events.
const heldRounds = 8

// relayClientHeld forwards what the client handed to the proxy, at most half the
// backlog at a time, each time the queue toward the server is below half its
// cap. False: the queue stayed too long for pauseTimeout; the loop asks again at
// its next tick, and the client meanwhile waits behind its closed receive window.
func (k *kernelRelay) relayClientHeld(ks *ksession, stats *RelayStats) bool {
	if !ks.clientHeld {
		ks.sm.Hold(sockmap.ToServer, true)
		ks.clientHeld = true
		stats.paused()
	}
	for range heldRounds {
		short := waitFor(time.Now().Add(pauseTimeout), 5*time.Millisecond, func() bool {
			q, err := ks.serverQueue()
			return err != nil || q <= k.queueCap()/2
		})
		if !short {
			return false
		}
		n, err := k.readSource(ks, sockmap.ToServer, int(k.backlog/2))
		if err == nil {
			err = k.settle(ks)
		}
		if err != nil {
			return true // the side that failed hangs up; the loop reports it
		}
		ks.sm.Ack(sockmap.ToServer, ks.consumed[sockmap.ToServer]-ks.base[sockmap.ToServer])
		if n < int(k.backlog/2) {
			return true
		}
	}
	return true
}

// serverDrained waits until the queue toward the server is empty, or the
// deadline. Pending TCP timers can hold a reference or two for up to a
// retransmission timeout after the queue emptied: a count that stays within
// them while the server's socket has room and nothing moves is taken as empty.
func (k *kernelRelay) serverDrained(ks *ksession, deadline time.Time) bool {
	last, since := ks.sm.Slot(sockmap.ToServer).Bytes, time.Now()
	return waitFor(deadline, time.Millisecond, func() bool {
		q, err := ks.serverQueue()
		if err != nil || q == 0 {
			return true
		}
		if b := ks.sm.Slot(sockmap.ToServer).Bytes; b != last {
			last, since = b, time.Now()
		}
		outq, err := unix.IoctlGetInt(ks.sfd, unix.SIOCOUTQ)
		return err != nil || q <= timerRefs && outq < ks.sndbuf/2 && time.Since(since) >= settleTime
	})
}

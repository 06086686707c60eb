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
// give or take the references of pending TCP timers, counted from the lowest
// counts seen (a first count is taken as the base).
func (ks *ksession) serverQueue() (int, error) {
	inodes := []uint64{ks.cino}
	if ks.inj != nil {
		inodes = append(inodes, ks.inj.ino)
	}
	refs, err := socketRefs(inodes...)
	if err != nil {
		return 0, err
	}
	ks.lowerBase(refs[0])
	q := refs[0] - int(ks.cbase.Load())
	if ks.inj != nil {
		q += max(refs[1]-ks.inj.base, 0)
	}
	return q, nil
}

// queueCap is the queue length, in packets, past which the proxy stops taking
// client bytes in: a direction's byte backlog in full-sized packets.
func (k *kernelRelay) queueCap() int { return max(8, int(k.backlog>>16)) }

// quietTime is how long a small count must stay still to be taken as timers'.
const quietTime = 50 * time.Millisecond

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
		short := waitFor(time.Now().Add(pauseTimeout), k.tick, func() bool {
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
			ks.forwardFailed(err)
			return true
		}
		ks.sm.Ack(sockmap.ToServer, ks.consumed[sockmap.ToServer]-ks.base[sockmap.ToServer])
		if n < int(k.backlog/2) {
			return true
		}
	}
	return true
}

// serverDrained waits until the queue toward the server is empty, or the
// deadline; false: bytes may still be queued (Remove would drop them). A count
// that stays within what pending TCP timers hold for quietTime is taken as
// empty: a queued packet would have moved it. A client socket gone from
// /proc/net/tcp (reset by its peer) cannot be counted; its client has left. A
// session never counted before has no base to count from: its queue is taken
// as empty once the redirected count is still and the server socket has room.
func (k *kernelRelay) serverDrained(ks *ksession, deadline time.Time) bool {
	if ks.cbase.Load() == 0 && ks.inj == nil {
		last, since := ks.sm.Slot(sockmap.ToServer).Bytes, time.Now()
		return waitFor(deadline, time.Millisecond, func() bool {
			if b := ks.sm.Slot(sockmap.ToServer).Bytes; b != last {
				last, since = b, time.Now()
			}
			outq, err := unix.IoctlGetInt(ks.sfd, unix.SIOCOUTQ)
			return err != nil || outq < ks.sndbuf/2 && time.Since(since) >= settleTime
		})
	}
	last, since := -1, time.Now()
	return waitFor(deadline, 5*time.Millisecond, func() bool {
		q, err := ks.serverQueue()
		if err != nil || q <= 0 {
			return true
		}
		if q != last {
			last, since = q, time.Now()
		}
		return q <= timerRefs && time.Since(since) >= quietTime
	})
}

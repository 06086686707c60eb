package proxy

import (
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"golang.org/x/sys/unix"
)

// A pumped session's server connection, left idle by its client, is reset by the
// pump itself: it writes the reset queries to the server's socket and reads their
// answers in its loop, then hands the socket back out of its epoll set and outside
// Go's netpoller. The next pumped session takes the socket as it is, so a reused
// server connection never goes back and forth between the two (a dup, a close and
// two epoll changes one way; a dup, four address and option look-ups and two epoll
// changes the other) and its reset costs no goroutine wake-up of its own.
//
// What happens to the reset session next (it is parked on its branch) runs outside
// the loop, and not at once (see afterLoop). The lease was released when the client
// left, before the reset.

// pumpReset is a reset the pump runs, and what it has seen of the server's answer.
type pumpReset struct {
	msgs     []byte        // the reset's queries
	want     int           // ReadyForQuery answers they end in
	timeout  time.Duration // from the write to the last answer
	deadline time.Time
	// then is given the reset server's socket, or -1 when the reset failed (the
	// socket is closed then); it runs once, outside the loop (see afterLoop).
	then func(server int)

	tags []string // the CommandComplete tag each query answers with

	frames   frames
	got      int    // ReadyForQuery messages seen
	tag      []byte // the body of the CommandComplete being read
	tagNeed  int64  // its bytes still to come
	tagged   bool   // the current query's CommandComplete came, with its tag
	failed   bool   // an ErrorResponse, a status other than 'I', or an answer not the queries'
	wantStat bool   // the last ReadyForQuery's status byte is still to come
	reports  statusCapture
}

// newPumpReset returns the reset of these queries, bounded by timeout, whose end
// is told to then.
func newPumpReset(queries []string, timeout time.Duration, then func(server int)) *pumpReset {
	var msgs []byte
	tags := make([]string, len(queries))
	for i, q := range queries {
		msgs, _ = (&pgproto3.Query{String: q}).Encode(msgs)
		tags[i] = commandTag(q)
	}
	return &pumpReset{msgs: msgs, want: len(queries), tags: tags, timeout: timeout, then: then}
}

// take notes b, the next bytes of the server's answer. It reports done once the
// last ReadyForQuery has come, and ok when every one said 'I' and followed its
// query's CommandComplete, nothing but notices and parameter reports came besides,
// and nothing came after the last one (as serverConn.roundTrip requires). So an
// answer that is not the reset's (a query of the last client still running, were
// the session taken for idle wrongly) fails the reset, and the session is closed.
func (r *pumpReset) take(b []byte) (done, ok bool) {
	if r.tagNeed > 0 && len(b) > 0 {
		r.tagBytes(b[:min(int64(len(b)), r.tagNeed)])
	}
	if r.reports.need > 0 {
		r.reports.more(b)
	}
	if r.wantStat && len(b) > 0 {
		r.wantStat = false
		r.failed = r.failed || b[0] != 'I'
		if r.got == r.want {
			return true, !r.failed && len(b) == 1
		}
	}
	end := -1
	r.frames.scan(b, func(typ byte, _, bodyAt int) bool {
		switch typ {
		case 'N':
		case 'S':
			r.reports.begin(b, bodyAt, r.frames.remain)
			r.failed = r.failed || r.reports.lost
		case 'C':
			r.tag, r.tagNeed, r.tagged = r.tag[:0], r.frames.remain, false
			if r.tagNeed > 64 { // longer than any tag a reset answers with
				r.failed, r.tagNeed = true, 0
				break
			}
			if k := min(int64(len(b)-bodyAt), r.tagNeed); k > 0 || r.tagNeed == 0 {
				r.tagBytes(b[bodyAt : bodyAt+int(max(k, 0))])
			}
		case 'Z':
			r.failed = r.failed || !r.tagged
			r.tagged = false
			r.got++
			if bodyAt >= len(b) {
				r.wantStat = true
			} else {
				r.failed = r.failed || b[bodyAt] != 'I'
			}
			if r.got == r.want {
				end = bodyAt + 1
				return false
			}
		default: // 'E', and anything a DISCARD ALL or a SET does not answer with
			r.failed = true
		}
		return true
	})
	switch {
	case r.frames.broken:
		return true, false
	case end < 0 || r.wantStat:
		return false, false
	}
	return true, !r.failed && end == len(b)
}

// tagBytes adds p to the CommandComplete body being read and, once it is whole,
// checks it is the tag of the query being answered.
func (r *pumpReset) tagBytes(p []byte) {
	r.tag = append(r.tag, p...)
	r.tagNeed -= int64(len(p))
	if r.tagNeed > 0 {
		return
	}
	r.tagged = r.got < len(r.tags) && string(r.tag) == r.tags[r.got]+"\x00"
	r.failed = r.failed || !r.tagged
}

// startReset writes s's reset to its server, whose client has left, and keeps the
// server's socket in the loop for the answer. The socket's interest is set back to
// reading when pending bytes for the client had taken it away (watch). It reports
// false when the queries could not be written whole; the caller closes the socket.
func (p *pump) startReset(s *pumpSession, readOff bool) bool {
	r := s.reset
	n, err := p.write(s.server, r.msgs)
	for err == unix.EINTR {
		n, err = p.write(s.server, r.msgs)
	}
	if err != nil || n != len(r.msgs) {
		return false
	}
	if readOff {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(s.server)}
		if unix.EpollCtl(p.epfd, unix.EPOLL_CTL_MOD, s.server, &ev) != nil {
			return false
		}
	}
	r.deadline = time.Now().Add(r.timeout)
	s.resetting = true
	p.mu.Lock()
	p.socks[int32(s.server)] = s
	p.mu.Unlock()
	return true
}

// readReset reads the server's answer to s's reset.
func (p *pump) readReset(s *pumpSession) {
	for {
		n, err := p.read(s.server, p.scratch[:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return
		case err != nil || n == 0:
			p.finishReset(s, false)
			return
		}
		if done, ok := s.reset.take(p.scratch[:n]); done {
			p.finishReset(s, ok)
			return
		}
	}
}

// finishReset ends s's reset: the server's socket leaves the loop and goes back
// to the session's owner when the reset succeeded, else it is closed.
func (p *pump) finishReset(s *pumpSession, ok bool) {
	p.mu.Lock()
	live := p.socks[int32(s.server)] == s
	delete(p.socks, int32(s.server))
	p.mu.Unlock()
	if !live {
		return
	}
	p.unwatch(s, s.server)
	then, server := s.reset.then, s.server
	if !ok {
		unix.Close(server)
		server = -1
	}
	p.later.add(func() { then(server) })
}

package proxy

import (
	"bytes"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Parameter reports. A server session reports a parameter (TimeZone, DateStyle,
// IntervalStyle, is_superuser, …) when it changes: at a client's SET, at the reset
// that undoes it, at a configuration reload. The greeting of a reused session must
// show the values the session has now, as a fresh start would, so every report
// the server sends after its start-up, to a client or to a reset, updates what
// the session recorded (serverConn.status).

// maxStatusBody bounds a ParameterStatus body the relays keep. A longer one (no
// parameter Postgres reports comes near) is not followed, and the session is not
// reused (statusCapture.lost).
const maxStatusBody = 1024

// statusCapture collects the bodies of ParameterStatus messages from a stream the
// caller frames, chunk by chunk, and hands each whole one to its session.
type statusCapture struct {
	sc   *serverConn // the session whose reports these are; nil: none kept
	body []byte      // the body being read
	need int64       // its bytes still to come
	lost bool        // a report was too long to keep: the recorded values are stale
}

// begin starts a report whose body, remain bytes long, begins at b[bodyAt] (or in
// a later chunk, when bodyAt is len(b)).
func (c *statusCapture) begin(b []byte, bodyAt int, remain int64) {
	if c.sc == nil {
		return
	}
	if remain > maxStatusBody {
		c.lost = true
		return
	}
	c.body, c.need = c.body[:0], remain
	c.more(b[bodyAt:min(len(b), bodyAt+int(remain))])
}

// more adds p, the continuation of the report being read, and applies the report
// once it is whole. It returns how many bytes of p it took.
func (c *statusCapture) more(p []byte) int {
	if c.need <= 0 {
		return 0
	}
	n := min(int64(len(p)), c.need)
	c.body = append(c.body, p[:n]...)
	c.need -= n
	if c.need == 0 {
		c.sc.noteStatus(c.body)
	}
	return int(n)
}

// noteStatus records a ParameterStatus body the server sent after the session's
// start-up. application_name is kept apart: each client's is set on its own, and
// the server's report of it (after a SET, or a reset) is what the next client is told.
func (sc *serverConn) noteStatus(body []byte) {
	var ps pgproto3.ParameterStatus
	if ps.Decode(body) != nil {
		return
	}
	if ps.Name == "application_name" {
		sc.shownApp, sc.appKnown = ps.Value, true
		return
	}
	var out []byte
	found := false
	for rest := sc.status; len(rest) >= 5; {
		n := 1 + int(uint32(rest[1])<<24|uint32(rest[2])<<16|uint32(rest[3])<<8|uint32(rest[4]))
		if n > len(rest) {
			break
		}
		msg := rest[:n]
		rest = rest[n:]
		if name, _, ok := bytes.Cut(msg[5:], []byte{0}); ok && string(name) == ps.Name {
			msg, _ = ps.Encode(nil)
			found = true
		}
		out = append(out, msg...)
	}
	if !found {
		out, _ = ps.Encode(out)
	}
	sc.status = out
}

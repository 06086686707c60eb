package proxy

import (
	"bytes"
	"encoding/binary"
)

// frames follows the message boundaries of one direction of a relayed session
// without buffering it: it sees every byte once, in order, in chunks of any size.
// The zero value is at a boundary, before the first message.
type frames struct {
	hdr    [5]byte
	hdrN   int   // bytes of the current message's header seen so far
	remain int64 // body bytes of the current message still to come
	broken bool  // a length below 4 was seen: the stream is not Postgres protocol
}

// atBoundary reports whether the next byte starts a message.
func (f *frames) atBoundary() bool { return f.hdrN == 0 && f.remain == 0 && !f.broken }

// scan walks b. For each message whose header completes in b it calls onMsg with
// the message type and the offset in b of the header's first byte (negative when
// the header began in an earlier chunk); the first body byte, if it is in b, is
// b[bodyAt]. onMsg returns false to stop the scan there. scan returns how many
// bytes it consumed.
func (f *frames) scan(b []byte, onMsg func(typ byte, start, bodyAt int) bool) int {
	i := 0
	for i < len(b) && !f.broken {
		if f.remain > 0 {
			n := int64(len(b) - i)
			if n > f.remain {
				n = f.remain
			}
			f.remain -= n
			i += int(n)
			continue
		}
		start := i - f.hdrN
		for f.hdrN < 5 && i < len(b) {
			f.hdr[f.hdrN] = b[i]
			f.hdrN++
			i++
		}
		if f.hdrN < 5 {
			return i
		}
		n := binary.BigEndian.Uint32(f.hdr[1:])
		if n < 4 {
			f.broken = true
			return i
		}
		f.hdrN, f.remain = 0, int64(n)-4
		if !onMsg(f.hdr[0], start, i) {
			return i
		}
	}
	return i
}

// sessionTrack follows a relayed session's protocol state closely enough to tell,
// when it ends, whether its server connection is idle and can be reset and reused:
// every query and sync the client sent has had its ReadyForQuery, the last one said
// 'I' (no transaction), both streams are at a message boundary, and nothing the
// client sent after its last sync is still unanswered. It also finds the client's
// Terminate, which must not reach a server connection that will be reused.
//
// The client half and the server half are each used by one goroutine at a time;
// idle reads both and must only be called once neither is in use.
type sessionTrack struct {
	client, server frames

	syncs      int64 // Query, Sync and FunctionCall messages the client sent
	unsynced   bool  // the client sent messages after its last sync point
	queryCopy  bool  // since its last Query the client sent copy data only
	terminated bool  // the client sent Terminate

	readies  int64 // ReadyForQuery messages the server sent
	status   byte  // the status byte of the last ReadyForQuery
	wantStat bool  // the last message seen was ReadyForQuery and its status byte is still to come
	lastType byte  // the type of the last message the server began

	reports statusCapture // the server's parameter reports, for its next client's greeting

	// dropIdle, when set, is called before a Query or Parse whose text starts
	// with a statement that needs the branch's parked sessions gone (dropsIdle)
	// has reached the server whole. The first maxStmtHead bytes of the message
	// are looked at, in whatever chunks they come.
	dropIdle func()
	head     stmtHead // a Query's or Parse's first bytes, when split across chunks
	// dropAgain: such a statement went out, and dropIdle runs again at the next
	// ReadyForQuery outside a transaction, once it has taken effect: a session
	// that began in between started with what the statement changes.
	dropAgain bool
}

// fromClient notes what the client sent. It returns how many bytes of b to forward
// to the server: all of them, or those before a Terminate message, which ends the
// session (terminated is then set).
func (t *sessionTrack) fromClient(b []byte) int {
	if t.terminated {
		return 0
	}
	fwd := len(b)
	if typ, body := t.head.more(b); body != nil {
		t.noteStatement(typ, body)
	}
	t.client.scan(b, func(typ byte, start, bodyAt int) bool {
		if t.dropIdle != nil && (typ == 'Q' || typ == 'P') {
			if body := t.head.begin(typ, b, bodyAt, t.client.remain); body != nil {
				t.noteStatement(typ, body)
			}
		}
		switch typ {
		case 'X':
			t.terminated = true
			fwd = max(start, 0)
			if start < 0 {
				// Part of the Terminate went out with an earlier chunk: the server
				// holds half a message, and the connection cannot be reused.
				t.unsynced = true
			}
			return false
		case 'Q', 'S', 'F':
			t.syncs++
			t.unsynced = false
			t.queryCopy = typ == 'Q'
		case 'd':
			t.unsynced = true
		case 'c', 'f':
			// CopyDone or CopyFail right after a Query and its copy data: the
			// Query's ReadyForQuery answers the copy (or the server, out of copy
			// mode after an error, ignores them). After anything else a Sync
			// must follow. A Sync sent during an extended-protocol copy is not
			// taken back: whether the server was still in copy mode to ignore
			// it, this side cannot tell, and such a session is not reused.
			t.unsynced = !t.queryCopy
			t.queryCopy = false
		default:
			t.unsynced = true
			t.queryCopy = false
		}
		return true
	})
	return fwd
}

// noteStatement calls dropIdle when body, the first bytes of a Query's or Parse's
// body, starts a statement that needs the branch's parked sessions gone.
func (t *sessionTrack) noteStatement(typ byte, body []byte) {
	if typ == 'P' {
		i := bytes.IndexByte(body, 0) // the prepared statement's name
		if i < 0 {
			return
		}
		body = body[i+1:]
	}
	if dropsIdle(body) {
		t.dropIdle()
		t.dropAgain = true
	}
}

// fromServer notes what the server sent.
func (t *sessionTrack) fromServer(b []byte) {
	if t.wantStat && len(b) > 0 {
		t.status, t.wantStat = b[0], false
		t.ready()
	}
	if t.reports.need > 0 {
		t.reports.more(b)
	}
	t.server.scan(b, func(typ byte, _, bodyAt int) bool {
		t.lastType = typ
		if typ == 'S' {
			t.reports.begin(b, bodyAt, t.server.remain)
		}
		if typ != 'Z' {
			return true
		}
		t.readies++
		if bodyAt < len(b) {
			t.status = b[bodyAt]
			t.ready()
		} else {
			t.wantStat = true
		}
		return true
	})
}

// ready notes a ReadyForQuery whose status is t.status: outside a transaction,
// what a statement that dropped the parked sessions changed has taken effect,
// and the sessions parked since are dropped too.
func (t *sessionTrack) ready() {
	if t.dropAgain && t.status == 'I' {
		t.dropAgain = false
		t.dropIdle()
	}
}

// idle reports whether the server connection is idle outside a transaction, with
// nothing in flight in either direction, so that it may be reset and reused.
func (t *sessionTrack) idle() bool {
	return t.client.atBoundary() && t.server.atBoundary() && !t.wantStat && !t.reports.lost &&
		!t.unsynced && t.syncs == t.readies && (t.status == 'I' || t.status == 0)
}

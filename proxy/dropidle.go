package proxy

import "bytes"

// An AllIdleDropper is a Lease whose branch can close every server session parked
// on it, and not park those of sessions on it now (branches.Lease.DropAllIdle).
type AllIdleDropper interface {
	DropAllIdle()
}

// dropsIdle reports whether q, the first bytes of a query's text, starts with a
// statement that Postgres refuses or waits on while other sessions use a database
// (DROP DATABASE, CREATE DATABASE … TEMPLATE, ALTER DATABASE … RENAME), or whose
// settings reach only sessions that start after it (ALTER DATABASE … SET, ALTER
// ROLE or USER … SET), or that ends a role a parked session is logged in as (DROP
// ROLE or USER). A parked server session is such another session, and one
// no client uses: the proxy closes them before the statement reaches the server.
func dropsIdle(q []byte) bool {
	first, rest := sqlWord(q)
	second, _ := sqlWord(rest)
	switch {
	case second == nil:
		return false
	case bytes.EqualFold(first, []byte("drop")):
		return bytes.EqualFold(second, []byte("database")) || bytes.EqualFold(second, []byte("role")) ||
			bytes.EqualFold(second, []byte("user"))
	case bytes.EqualFold(first, []byte("create")):
		return bytes.EqualFold(second, []byte("database"))
	case bytes.EqualFold(first, []byte("alter")):
		return bytes.EqualFold(second, []byte("database")) || bytes.EqualFold(second, []byte("role")) ||
			bytes.EqualFold(second, []byte("user"))
	}
	return false
}

// sqlWord returns the word q starts with after white space and comments, and what
// follows it; nil when q holds none (or ends inside a comment).
func sqlWord(q []byte) (word, rest []byte) {
	for len(q) > 0 {
		switch {
		case q[0] == ' ' || q[0] == '\t' || q[0] == '\n' || q[0] == '\r' || q[0] == '\f':
			q = q[1:]
		case bytes.HasPrefix(q, []byte("--")):
			i := bytes.IndexByte(q, '\n')
			if i < 0 {
				return nil, nil
			}
			q = q[i+1:]
		case bytes.HasPrefix(q, []byte("/*")):
			i := bytes.Index(q[2:], []byte("*/"))
			if i < 0 {
				return nil, nil
			}
			q = q[i+4:]
		default:
			n := 0
			for n < len(q) && (q[n] >= 'a' && q[n] <= 'z' || q[n] >= 'A' && q[n] <= 'Z') {
				n++
			}
			if n == 0 || n == len(q) {
				return nil, nil // not a word, or one that may go on past q
			}
			return q[:n], q[n:]
		}
	}
	return nil, nil
}

// maxStmtHead is how much of a Query's or Parse's body is kept when it is split
// across chunks: a statement behind longer comments is then not seen (in one
// chunk, all of it is looked at).
const maxStmtHead = 256

// stmtHead collects the first bytes of a Query's or Parse's body when they do not
// all come in the chunk that holds the message's header.
type stmtHead struct {
	typ  byte
	body []byte
	need int64 // bytes still to come
}

// begin starts a message of type typ whose body, remain bytes long, begins at
// b[bodyAt] (or in a later chunk, when bodyAt is len(b)). When b holds the body's
// first maxStmtHead bytes it returns what b holds of the body, without copying;
// else it keeps that and more returns the rest.
func (h *stmtHead) begin(typ byte, b []byte, bodyAt int, remain int64) []byte {
	want := min(remain, maxStmtHead)
	have := b[bodyAt:min(int64(len(b)), int64(bodyAt)+remain)]
	if int64(len(have)) >= want {
		return have
	}
	h.typ, h.body, h.need = typ, append(h.body[:0], have...), want-int64(len(have))
	return nil
}

// more adds the start of b to the message begun in an earlier chunk, and returns
// its type and first bytes once they are all in.
func (h *stmtHead) more(b []byte) (byte, []byte) {
	if h.need == 0 {
		return 0, nil
	}
	n := min(int64(len(b)), h.need)
	h.body = append(h.body, b[:n]...)
	h.need -= n
	if h.need > 0 {
		return 0, nil
	}
	return h.typ, h.body
}

package proxy

import (
	"bufio"
	"bytes"
	"encoding/binary"

	"github.com/jackc/pgx/v5/pgproto3"
)

// codeInsufficientResources is what a client is told when its branch's server
// could not start a backend for the session.
const codeInsufficientResources = "53000"

// maxV2ErrorLength is the greatest length word a protocol 3 ErrorResponse is taken
// to have in answer to a startup packet; a larger one (or one under 8) is the text
// of an old-style error, as libpq decides (MAX_ERRLEN).
const maxV2ErrorLength = 30000

// readForkFailure reads the error a postmaster writes instead of a session's first
// message when it cannot fork a backend for it (a process or memory limit, such as
// a container's pids limit): 'E', the text and a NUL, in the pre-3.0 format, since
// no backend exists yet to know the client's protocol. It returns nil, reading
// nothing, when the first message is anything else. The error is the client's in
// protocol 3, 53000 with a hint.
func readForkFailure(br *bufio.Reader) *backendError {
	hdr, err := br.Peek(5)
	if err != nil || hdr[0] != 'E' {
		return nil
	}
	if n := binary.BigEndian.Uint32(hdr[1:]); n >= 8 && n <= maxV2ErrorLength {
		return nil
	}
	line, _ := br.ReadSlice(0) // as much as came, when no NUL does
	text := string(bytes.TrimSpace(bytes.TrimSuffix(line[1:], []byte{0})))
	msg, _ := (&pgproto3.ErrorResponse{
		Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: codeInsufficientResources, Message: text,
		Hint: "the branch's server has no process or memory to spare for another session: " +
			"end other sessions, or raise its limits (under --runtime docker, --branch-pids and --branch-memory)",
	}).Encode(nil)
	return &backendError{msg: msg, code: codeInsufficientResources, text: text, noFork: true}
}

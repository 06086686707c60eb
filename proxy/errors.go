package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgbranchproxy/pgbranchproxy/branches/errs"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// SQLSTATE codes the proxy sends.
const (
	codeInvalidDatabase   = "3D000" // invalid_catalog_name
	codeCannotConnectNow  = "57P03"
	codeTooMany           = "53300"
	codeDiskFull          = "53100"
	codeAdminShutdown     = "57P01"
	codeProtocolViolation = "08P01"
	codeInvalidPassword   = "28P01"
	codeFeatureNotSupp    = "0A000"
	codeInvalidParameter  = "22023"
	codeObjectInUse       = "55006"
	codeInternal          = "XX000"
	codeSystemError       = "58000" // system_error: outside Postgres (the branch's runtime)
	codeInvalidAuthSpec   = "28000"
	codeDuplicateDatabase = "42P04" // the engine's: a branch exists with another parent
)

// errTooManyClients refuses a connection beyond MaxClientConns.
var errTooManyClients = errors.New("too many clients")

// clientError is what a client is told about a failure, and the id that ties an
// internal error's log line to the client's Detail.
type clientError struct {
	code, message, detail, hint string
	id                          string // set for internal errors: log it
}

// ClientError is an error that says itself what a client is told: a Branches
// implementation whose failures are not the engine's (a front that cannot reach a
// node) returns one, and the client gets its SQLSTATE and words as they are.
type ClientError struct {
	Code, Message, Hint string
	Err                 error // the cause, for logs; never shown to the client
}

func (e *ClientError) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *ClientError) Unwrap() error { return e.Err }

// SQLState, ClientMessage and ClientHint make a ClientError a toldError.
func (e *ClientError) SQLState() string      { return e.Code }
func (e *ClientError) ClientMessage() string { return e.Message }
func (e *ClientError) ClientHint() string    { return e.Hint }

// errProtocol marks a client that broke the protocol.
var errProtocol = errors.New("protocol violation")

// errTimedOut marks a start-up that failed once its own deadline had passed
// (--startup-timeout): whatever the step that noticed, the client may try again.
var errTimedOut = errors.New("timed out")

// errNotSupported marks a request the proxy deliberately does not serve.
var errNotSupported = errors.New("not supported")

// toldError is an error that says itself what a client is told: the engine's
// (package branches/errs) and a front's (ClientError). An error of class 58
// (outside Postgres) is logged with an error id the client is given too.
type toldError interface {
	error
	SQLState() string
	ClientMessage() string
	ClientHint() string
}

// rankedError is a toldError that ranks against others in one chain: a branch
// on a lost node is fenced too, and the client is told it is lost. The lowest
// rank is told; an error without one ranks first.
type rankedError interface {
	Rank() int
}

// toldIn is the told error of err's chain with the lowest rank, or nil.
func toldIn(err error) toldError {
	var best toldError
	bestRank := 0
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if t, ok := err.(toldError); ok {
			rank := 0
			if r, ok := err.(rankedError); ok {
				rank = r.Rank()
			}
			if best == nil || rank < bestRank {
				best, bestRank = t, rank
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return best
}

// classify is the one mapping from internal errors to what a client sees. Internal
// details (paths, process ids, wrapped causes) never reach the client: they get an
// error id that the log line carries too.
func classify(err error) clientError {
	if t := toldIn(err); t != nil && !startOutOfTime(t, err) {
		ce := clientError{code: t.SQLState(), message: t.ClientMessage(), hint: t.ClientHint()}
		if strings.HasPrefix(ce.code, "58") {
			ce.id = newErrorID()
			ce.detail = "error id " + ce.id
			ce.hint = joinHint(ce.hint, "the proxy's log has this error id")
		}
		return ce
	}
	var re *router.Error
	switch {
	case errors.As(err, &re):
		code := codeInvalidDatabase
		if errors.Is(err, router.ErrInvalidOption) {
			code = codeInvalidParameter
		}
		return clientError{code: code, message: re.Message, hint: re.Hint}
	case errors.Is(err, errAuthFailed), errors.Is(err, errTooManyFailures):
		// The same words whether or not the role exists.
		return clientError{code: codeInvalidPassword, message: err.Error()}
	case errors.Is(err, errNoUser):
		return clientError{code: codeInvalidAuthSpec, message: err.Error()}
	case errors.Is(err, errSSLRequired):
		return clientError{code: codeInvalidAuthSpec, message: "connection requires SSL", hint: "connect with sslmode=require"}
	case errors.Is(err, errTooManyClients):
		return clientError{code: codeTooMany, message: "sorry, too many clients already"}
	case errors.Is(err, errProtocol):
		return clientError{code: codeProtocolViolation, message: err.Error()}
	case errors.Is(err, errNotSupported):
		return clientError{code: codeFeatureNotSupp, message: err.Error()}
	case errors.Is(err, errTimedOut):
		// After the engine's errors, but for a start that failed
		// (startOutOfTime): a cause it named says more than the clock running out.
		return clientError{code: codeCannotConnectNow, message: "timed out preparing the branch",
			hint: "try again; the server's --startup-timeout bounds how long a connection waits for its branch"}
	case errors.Is(err, errDialServer), errors.Is(err, errServerClosed):
		// The engine said the branch's server runs, and it could not be reached or
		// hung up before the session started, even after a second try (see
		// serverSession): the client may try again, and the log says why.
		id := newErrorID()
		return clientError{code: codeCannotConnectNow, message: "the branch's server is not accepting connections",
			detail: "error id " + id, hint: "try again in a moment; the proxy's log has this error id", id: id}
	}
	id := newErrorID()
	return clientError{code: codeInternal, message: "could not prepare the branch", detail: "error id " + id, id: id}
}

// startOutOfTime reports whether t, the told error of err's chain, is a start
// that failed (and nothing the engine ranks before it) once the client's own
// deadline had passed: the clock running out says more, as the client may try
// again, and a start that failed is the one engine error it outranks.
func startOutOfTime(t toldError, err error) bool {
	return t == toldError(errs.ErrStartFailed) && errors.Is(err, errTimedOut)
}

// joinHint adds more to a hint.
func joinHint(hint, more string) string {
	if hint == "" {
		return more
	}
	return hint + "; " + more
}

func newErrorID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// writeError sends a FATAL ErrorResponse.
func writeError(w io.Writer, ce clientError) error {
	buf, err := encodeError(ce)
	if err != nil {
		return err
	}
	_, err = w.Write(buf)
	return err
}

// encodeError is a FATAL ErrorResponse.
func encodeError(ce clientError) ([]byte, error) {
	msg := &pgproto3.ErrorResponse{
		Severity:            "FATAL",
		SeverityUnlocalized: "FATAL",
		Code:                ce.code,
		Message:             ce.message,
		Detail:              ce.detail,
		Hint:                ce.hint,
	}
	buf, err := msg.Encode(nil)
	if err != nil {
		return nil, fmt.Errorf("encode error response: %w", err)
	}
	return buf, nil
}

// errDialServer marks a failure to connect to a branch server at all, as opposed
// to one during the start-up of a connection it took.
var errDialServer = errors.New("dial branch server")

// errServerClosed marks a branch server that closed a new connection (or failed
// it) before it answered the session's start: it exited meanwhile.
var errServerClosed = errors.New("branch server closed the connection")

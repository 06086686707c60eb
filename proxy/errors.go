package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

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

// errProtocol marks a client that broke the protocol.
var errProtocol = errors.New("protocol violation")

// errTimedOut marks a start-up that failed once its own deadline had passed
// (--startup-timeout): whatever the step that noticed, the client may try again.
var errTimedOut = errors.New("timed out")

// errNotSupported marks a request the proxy deliberately does not serve.
var errNotSupported = errors.New("not supported")

// classify is the one mapping from internal errors to what a client sees. Internal
// details (paths, process ids, wrapped causes) never reach the client: they get an
// error id that the log line carries too.
func classify(err error) clientError {
	var re *router.Error
	var ce *ClientError
	switch {
	case errors.As(err, &ce):
		return clientError{code: ce.Code, message: ce.Message, hint: ce.Hint}
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
	case errors.Is(err, errs.ErrTooManySessions):
		return clientError{code: codeTooMany, message: "too many sessions on this branch", hint: "close idle sessions or raise --max-sessions"}
	case errors.Is(err, errProtocol):
		return clientError{code: codeProtocolViolation, message: err.Error()}
	case errors.Is(err, errNotSupported):
		return clientError{code: codeFeatureNotSupp, message: err.Error()}
	case errors.Is(err, errs.ErrQuota):
		// The manager's message names the branch and its usage, nothing internal.
		return clientError{code: codeDiskFull, message: err.Error(), hint: "reset or destroy the branch, or raise its quota with: pgbranchproxy branch set NAME --quota SIZE"}
	case errors.Is(err, errs.ErrDiskFull):
		return clientError{code: codeDiskFull, message: "no disk budget left for a new branch", hint: "destroy unused branches or raise --disk-budget"}
	case errors.Is(err, errs.ErrNoSpace):
		return clientError{code: codeDiskFull, message: "the disk that holds the branches is full", hint: "reset or destroy branches that filled it"}
	case errors.Is(err, errs.ErrTooMany):
		return clientError{code: codeTooMany, message: "too many branches are running and all of them have sessions", hint: "try again when a session ends, or raise --max-running"}
	// A lost branch may also carry ErrFenced (a write found it lost): say lost.
	case errors.Is(err, errs.ErrLost):
		return clientError{code: codeCannotConnectNow, message: "the branch was on a lost node",
			hint: "its node was declared dead; destroy the branch (pgbranchproxy branch destroy) to use the name again"}
	case errors.Is(err, errs.ErrNodeLost):
		return clientError{code: codeCannotConnectNow, message: "this pgbranchproxy node lost its registration in the catalog",
			hint: "it stopped its branches' servers and serves none until it is restarted"}
	case errors.Is(err, errs.ErrDraining):
		return clientError{code: codeCannotConnectNow, message: "this pgbranchproxy node is draining: it takes no new branches",
			hint: "new branches go to the nodes that are not draining (a front places them there); pgbranchproxy node resume ends the drain"}
	case errors.Is(err, errs.ErrFenced):
		return clientError{code: codeCannotConnectNow, message: "the branch is no longer served by this pgbranchproxy node",
			hint: "another registration of this node owns it in the catalog; restart the server"}
	case errors.Is(err, errs.ErrLayerMissing):
		return clientError{code: codeCannotConnectNow, message: "the branch's seed is not on the node that serves it",
			hint: "it could not be copied from a node that holds it: check that the nodes reach each other's peer address (pgbranchproxy node ls)"}
	case errors.Is(err, errs.ErrCatalogUnavailable):
		return clientError{code: codeCannotConnectNow, message: "catalog unavailable",
			hint: "branches already running still serve; creating or waking one works again when the catalog is back"}
	case errors.Is(err, errs.ErrNotGone):
		return clientError{code: codeCannotConnectNow, message: "an ephemeral branch of this name whose last session ended could not be destroyed yet",
			hint: "try again in a moment; the server's log says what kept it"}
	case errors.Is(err, errs.ErrNotReady):
		return clientError{code: codeCannotConnectNow, message: "the branch is still starting up", hint: "try again in a moment"}
	case errors.Is(err, errs.ErrEnded):
		return clientError{code: codeAdminShutdown, message: "the branch was stopped or destroyed by an administrator",
			hint: "connect again: a stopped branch wakes, a destroyed one is created anew"}
	case errors.Is(err, errs.ErrNotFound):
		return clientError{code: codeInvalidDatabase, message: "no such source or branch"}
	case errors.Is(err, errs.ErrClosed):
		return clientError{code: codeAdminShutdown, message: "the proxy is shutting down"}
	case errors.Is(err, errs.ErrExists):
		// Two nodes raced for one new name: the other one has it.
		return clientError{code: codeCannotConnectNow, message: "the branch is being created elsewhere", hint: "try again in a moment"}
	case errors.Is(err, errs.ErrBusy):
		return clientError{code: codeObjectInUse, message: "the branch is in use by other sessions", hint: "pgbranch.reset=on needs the branch to have no other session"}
	case errors.Is(err, errs.ErrInvalid):
		return clientError{code: codeInvalidParameter, message: "invalid branch request"}
	case errors.Is(err, errTimedOut):
		// Last: a cause the engine named (above) says more than the clock running out.
		return clientError{code: codeCannotConnectNow, message: "timed out preparing the branch",
			hint: "try again; the server's --startup-timeout bounds how long a connection waits for its branch"}
	case errors.Is(err, errs.ErrStartFailed):
		// Not the client's to mend, and rarely mended by trying again: an
		// administrator reads why in branch ls or the log.
		id := newErrorID()
		return clientError{code: codeSystemError, message: "the branch's server did not start",
			detail: "error id " + id, hint: "pgbranchproxy branch ls shows why; the proxy's log has this error id", id: id}
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

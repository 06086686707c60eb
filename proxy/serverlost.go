package proxy

// A backend waiting in a query when its postmaster dies (a kill -9, the OOM
// killer) exits without a word, and a backend that crashes says none either: its
// client would see only a closed connection ("server closed the connection
// unexpectedly"), with no SQLSTATE to act on. An idle backend, by contrast, tells
// its client FATAL 57P01 "terminating connection due to unexpected postmaster
// exit". So when the server connection of a tracked session ends while the
// server's stream is at a message boundary and the last message it sent was not an
// error (which said why), the relay tells the client the same before closing its
// connection: a FATAL with 57P01. An untracked session (no reuse, no kept
// connection) cannot tell where the server's messages end and is not told; nor is
// a session spliced by the kernel relay.

// serverLostNotice is that FATAL.
func serverLostNotice() []byte {
	b, _ := encodeError(clientError{code: codeAdminShutdown,
		message: "terminating connection because the branch server closed it unexpectedly"})
	return b
}

// serverLost reports whether the client of a session whose server connection has
// ended is to be told so: t is set, the server's stream is at a message boundary,
// and the last message it began was not an ErrorResponse. Only once nothing else
// reads t's server half.
func (t *sessionTrack) serverLost() bool {
	return t != nil && t.server.atBoundary() && !t.wantStat && t.lastType != 'E'
}

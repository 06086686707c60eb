package proxy

// A session the pump ends because the proxy is closing (its --grace has passed)
// is told so as Postgres tells a session at a fast shutdown: a FATAL with 57P01,
// which drivers and pools read as an administrator's shutdown rather than a
// dropped connection. A single server's sessions usually get it from their branch
// server, stopped first; a front's, from here.

// shutdownNotice is that FATAL.
func shutdownNotice() []byte {
	b, _ := encodeError(clientError{code: codeAdminShutdown,
		message: "terminating connection because the proxy is shutting down"})
	return b
}

// sayShuttingDown writes shutdownNotice to s's client when what the server sent
// is whole, as far as the session's track follows it, and all of it has reached
// the client; without waiting: a client that cannot take it now is closed all
// the same. An untracked session (no reuse, no kept connection) is not told.
func (p *pump) sayShuttingDown(s *pumpSession) {
	if s.track == nil || !s.track.server.atBoundary() || s.toClient.pending() {
		return
	}
	p.write(s.client, shutdownNotice())
}

// Package proxy is the Postgres front door: it accepts client connections, reads
// and answers the startup packet itself (SSLRequest, GSSENCRequest, CancelRequest,
// StartupMessage), routes the session to a branch through the router, asks the
// branch manager for a lease on it, logs in to the branch's server on the client's
// behalf, and then relays bytes both ways until either side closes.
//
// Framing of everything the proxy reads before the relay is done here, with exact
// reads, so no byte a client or server sent is buffered away from the raw copy;
// pgproto3 only encodes and decodes message bodies.
package proxy

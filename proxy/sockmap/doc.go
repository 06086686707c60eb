// Package sockmap splices a client's TCP socket to a branch server's unix socket in
// the kernel, with two BPF socket maps and three small programs written with
// cilium/ebpf's asm package (no compiler needed at build or run time).
//
// Two maps, one verdict program each: the TCP map's follows client message
// boundaries through each packet (so that a Terminate is handed to the proxy, not
// the server); a stream parser would frame them for it, but one cannot be attached
// to a map holding unix sockets, and with a parser the kernel shows the program
// packets from their start, not the message's. On AF_UNIX the socket a program sees is the sender, so server bytes are routed by
// the cookie of the server's own socket (the peer of the proxy's, found with
// sock_diag); client bytes by the TCP socket's own cookie.
//
// Each direction of a session has a slot in a memory-mapped array: bytes
// redirected, bytes handed to the proxy instead, and the proxy's controls (hold,
// acknowledged bytes, a redirect limit). A direction redirects only while nothing
// handed to the proxy is still unacknowledged, so bytes never overtake each other.
//
// A Relay is safe for concurrent use.
package sockmap

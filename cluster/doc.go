// Package cluster makes and checks the credentials that fronts and nodes use to
// trust each other: a cluster CA, and member certificates it signs for the roles
// front and node.
//
// Init writes a CA (ECDSA P-256) into a directory; Issue writes a member's
// certificate and key there, signed by that CA. A member certificate names its
// role and name in one URI SAN, pgbranch://<role>/<name>, which is what the
// handshake checks; the member's DNS names and IP addresses are SANs as well, for
// other tools, but a front does not check a node's address: a node keeps its
// certificate when its address changes. Keys are written with mode 0600.
//
// Load reads a member's files (the CA certificate, its certificate and key) and
// returns a Member, whose ListenerConfig is the TLS configuration of a node's
// internal listener (TLS 1.3; it requires a client certificate from the cluster
// CA whose role is front) and whose DialConfig is a front's configuration for
// dialing one named node (the node's certificate must come from the cluster CA,
// have the role node and the expected name). A certificate of another CA, an
// expired one, or one of the wrong role or name fails the handshake.
//
// The package imports nothing of the project's: it does file and crypto work
// only, keeps no global state and does not log. Its functions are safe for
// concurrent use; two Init calls, or two Issue calls of one member without Force,
// on one directory do not overwrite each other's files (one gets ErrExists). Errors wrap the sentinels in errors.go.
package cluster

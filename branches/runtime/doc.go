// Package runtime starts and stops the Postgres servers that serve branches and
// seeds.
//
// A Runtime turns a Spec (a data directory, a private socket directory, settings
// and environment) into a running Instance whose only address is a unix socket.
// Process, the default, runs Postgres as an unprivileged OS user on this host; a
// Docker runtime can implement the same interface. Binaries locates the Postgres
// programs for a major version.
package runtime

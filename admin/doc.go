// Package admin serves the HTTP+JSON administration API (sources, branches,
// health) that the CLI subcommands talk to, normally on the state directory's
// admin.sock. Handlers are safe for concurrent use.
package admin

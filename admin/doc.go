// Package admin serves the HTTP+JSON administration API (sources, branches,
// tokens, the audit log, health) that the CLI subcommands talk to, on the state
// directory's admin.sock (Local: every permission, recorded as "local") and on
// --admin-listen (Remote: bearer tokens of role admin, ci or read).
//
// Every endpoint is one Route in routes.go, which declares the Need its caller's
// token must meet; the guard in front of each one checks it, and appends requests
// that change something, and refused ones, to the audit log. Handlers are safe for
// concurrent use.
package admin

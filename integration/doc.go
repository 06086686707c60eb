// Package integration holds the end-to-end tests: they build the real
// pgbranchproxy binary and the lazyrw shim, start `serve` as root on a private
// state directory, seed sources with real Postgres, and talk to branches with
// psql, pgx and pgbench. They need root, OverlayFS and the PostgreSQL server
// binaries; `go test -short` skips them.
package integration

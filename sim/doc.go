// Package sim is the multi-host simulation of fronts and nodes on one machine
// (docs/scale-out.md, "Simulation"). Its tests make their own hosts as network
// namespaces joined by a bridge in a namespace of its own, so that nothing they
// send can leave the machine, and run a catalog Postgres, nodes and fronts there
// as real processes: the pgbranchproxy binary, built for the run, and Postgres 15
// as OS user postgres. Clients dial from a client host of their own. Everything
// the tests make carries the run's prefix (pgbsim-<pid>-) and is removed when they
// end; a run that finds leftovers of a crashed one removes them first.
//
// They need root, iproute2 and the PostgreSQL 15 server binaries; `go test
// -short` skips them. `make sim-smoke` runs TestSmoke; `make test` runs it with
// the rest of `go test ./...`.
package sim

// Command bench is pgbranchproxy's side-by-side benchmark harness (`make bench`).
//
// It starts everything it measures itself, on loopback and unix sockets only:
// a plain PostgreSQL cluster per data size (the "direct" target and the
// CREATE DATABASE … TEMPLATE alternative), a PgBouncer in session mode in front
// of the small plain cluster, and `pgbranchproxy serve` on a private state
// directory whose sources are seeded from copies of those same clusters. Rounds
// interleave the configurations being compared (A B C, then B C A, …) and every
// result is reported as a median with its min-max and, where two configurations
// are compared, as the median of the per-round (paired) ratios.
//
// The markdown table goes to stdout, progress to stderr. Environment:
//
//	BENCH_QUICK=1      fewer, shorter rounds and smaller data (under three minutes)
//	BENCH_JSON=path    also write [{"name","value","unit",...}] to path
//	BENCH_ROUNDS=n     override the number of throughput rounds
//	BENCH_SECONDS=n    override the length of one pgbench run
//	BENCH_BIN=dir      where pgbranchproxy and liblazyrw.so are (default: bin/ of the module)
//	BENCH_PG_BIN=dir   PostgreSQL server binaries (default: pg_config --bindir, else /usr/lib/postgresql/<newest>/bin)
//	BENCH_KEEP=1       keep the temporary directory (for debugging)
//	BENCH_ONLY=phase   run one phase alone on the small data set: nofork (warm pool,
//	                   server-session reuse, the 200-test suites), containers
//	                   (--runtime docker next to the process runtime; needs `make image`)
//	                   relay (throughput: direct, PgBouncer, the proxy on the
//	                   default relay and a second proxy with --relay kernel)
//	                   or roles (a front and a node on one Postgres catalog against
//	                   the single-host proxy)
//
// It needs root (the proxy mounts OverlayFS) and the OS user postgres. Every
// process it starts is stopped by PID and its temporary directory removed, also
// on error and on Ctrl-C. The heavy code runs only from main; `go test ./bench`
// tests the statistics and report helpers in seconds.
package main

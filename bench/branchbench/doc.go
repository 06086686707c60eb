// Command branchbench runs BranchBench's five agentic workflows (Ang et al.,
// "Aligning Database Branching with Agentic Demands", arXiv:2604.17180) through
// pgbranchproxy (`make bench-branchbench`).
//
// Each workflow is one of the paper's parameter tuples over one loop: a worker picks
// a parent (its current branch if that has depth and fanout left, else a random
// branch that has, else the root), forks a child through the proxy by connecting to
// a new branch name with `-c pgbranch.from=PARENT`, runs the step's schema changes,
// data mutations and eval queries on that connection, and destroys the child
// through the admin API with probability γ. Workers are real client connections,
// at most BRANCHBENCH_CONCURRENCY (8) at once; cross-branch queries ask every live
// branch and sum the answers in the driver. The seed is our own deterministic
// CH-benCHmark-shaped generator (TPC-C's tables plus TPC-H's region, nation and
// supplier), loaded with COPY.
//
// The markdown report goes to stdout, progress to stderr. Environment:
//
//	BRANCHBENCH_QUICK=1          fewer workers and steps and a 2-warehouse seed (under three minutes)
//	BRANCHBENCH_WORKFLOWS=a,b    run only these workflows, in this order
//	BRANCHBENCH_STEPS=n          steps per worker (S) of every workflow, instead of the tuple's
//	BRANCHBENCH_CONCURRENCY=n    client connections at once (default 8)
//	BRANCHBENCH_MAX_RUNNING=n    the proxy's --max-running (default 12)
//	BENCH_JSON=path              also write [{"name","value","unit",...}] to path
//	BENCH_BIN=dir                where pgbranchproxy and liblazyrw.so are (default: bin)
//	BENCH_KEEP=1                 keep the temporary directory
//
// It needs root and the OS user postgres. The proxy it starts is stopped by PID
// and its temporary directory removed, also on error and on Ctrl-C.
package main

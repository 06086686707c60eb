package main

import (
	"context"
	"fmt"
	"path/filepath"
)

// startKernelProxy starts a second proxy whose sessions are relayed in the kernel
// (--relay kernel), on its own state directory with the data set as its source,
// so that throughput pairs it round by round with the first proxy (the default
// relay), direct TCP and PgBouncer. The plain cluster is stopped while its data
// directory is copied, and started again (on a new port).
func startKernelProxy(ctx context.Context, e *env, d *dataset) (*proxyServer, error) {
	kp, err := e.startProxy(ctx, filepath.Join(e.root, "state-kernel"), true, "--relay", "kernel")
	if err != nil {
		return nil, fmt.Errorf("proxy with --relay kernel: %w", err)
	}
	if err := d.stop(); err != nil {
		kp.stop()
		return nil, err
	}
	_, err = kp.cli(ctx, "source", "add", d.name, "--from-datadir", d.dataDir)
	if serr := d.start(ctx, e); err == nil {
		err = serr
	}
	if err != nil {
		kp.stop()
		return nil, err
	}
	return kp, nil
}

// kernelPath starts the kernel proxy's branch "bench" and returns the path to it.
func kernelPath(ctx context.Context, kp *proxyServer, d *dataset) (path, error) {
	conn := kp.dsn(d.name + "@bench")
	if _, err := firstQuery(ctx, conn); err != nil {
		return path{}, fmt.Errorf("create branch bench (--relay kernel): %w", err)
	}
	return path{"proxy_kernel", conn}, nil
}

// kernelRatios adds the kernel relay's paired ratios: the targets against
// direct TCP and PgBouncer, and the kernel relay against the first proxy's.
func kernelRatios(ratio func(name, a, b, note string)) {
	const paired = "--relay kernel, paired by round"
	ratio("select_only_c1_ratio/kernel_vs_direct_tcp", "select_only_c1_tps/proxy_kernel", "select_only_c1_tps/direct_tcp", paired)
	ratio("select_only_c8_ratio/kernel_vs_direct_tcp", "select_only_c8_tps/proxy_kernel", "select_only_c8_tps/direct_tcp", paired)
	ratio("select_only_c1_ratio/kernel_vs_pgbouncer", "select_only_c1_tps/proxy_kernel", "select_only_c1_tps/pgbouncer", paired)
	ratio("select_only_c8_ratio/kernel_vs_pgbouncer", "select_only_c8_tps/proxy_kernel", "select_only_c8_tps/pgbouncer", paired)
	ratio("tpcb_c4_ratio/kernel_vs_direct_tcp", "tpcb_c4_tps/proxy_kernel", "tpcb_c4_tps/direct_tcp", paired)
	ratio("select_only_c1_ratio/kernel_vs_epoll", "select_only_c1_tps/proxy_kernel", "select_only_c1_tps/proxy", paired)
	ratio("select_only_c8_ratio/kernel_vs_epoll", "select_only_c8_tps/proxy_kernel", "select_only_c8_tps/proxy", paired)
	ratio("tpcb_c4_ratio/kernel_vs_epoll", "tpcb_c4_tps/proxy_kernel", "tpcb_c4_tps/proxy", paired)
	ratio("connect_per_txn_ratio/kernel_vs_epoll", "connect_per_txn_tps/proxy_kernel", "connect_per_txn_tps/proxy", "--relay kernel, server-session reuse on, paired by round")
}

// kernelTargets records whether this run met the kernel relay's targets.
func kernelTargets(rep *report) {
	rep.check("kernel relay ≥ 0.85× direct TCP, select-only c1 (paired)", "select_only_c1_ratio/kernel_vs_direct_tcp", func(v float64) bool { return v >= 0.85 })
	rep.check("kernel relay ≥ 0.92× direct TCP, select-only c8 (paired)", "select_only_c8_ratio/kernel_vs_direct_tcp", func(v float64) bool { return v >= 0.92 })
	rep.check("kernel relay ≥ 1.2× PgBouncer, select-only c8 (paired)", "select_only_c8_ratio/kernel_vs_pgbouncer", func(v float64) bool { return v >= 1.2 })
}

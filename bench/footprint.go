package main

import (
	"context"
	"fmt"
)

// footprint measures what one new branch of the small source owns (allocated
// bytes of its upper dir, from branch ls --json) right after creation and a first
// query, after a select-only pgbench run through the proxy, and after a TPC-B
// run followed by a CHECKPOINT (so that writes still in shared buffers are
// counted; the first two have nothing to flush). prefix names the rows
// (owned_mib or owned_mib_eager).
func footprint(ctx context.Context, e *env, px *proxyServer, d *dataset, prefix string, rep *report) error {
	name := "own-lazyrw"
	if !px.lazyrw {
		name = "own-eager"
	}
	dsn := px.dsn(d.name + "@" + name)
	measure := func(step string, checkpoint bool) error {
		if checkpoint {
			if err := execSQL(ctx, dsn, "CHECKPOINT"); err != nil {
				return err
			}
		}
		info, err := px.waitIdle(ctx, name)
		if err != nil {
			return err
		}
		rep.add(row{Name: prefix + "/" + step, Unit: "MiB", Value: float64(info.OwnedBytes) / (1 << 20), N: 1,
			Note: fmt.Sprintf("cow_mode=%s, %.0f MiB seed", info.CowMode, d.sizeMiB)})
		e.logf("%s/%s: %.1f MiB (cow_mode %s)", prefix, step, float64(info.OwnedBytes)/(1<<20), info.CowMode)
		return nil
	}
	if _, err := firstQuery(ctx, dsn); err != nil {
		return err
	}
	if err := measure("after_create", false); err != nil {
		return err
	}
	if _, err := runPgbench(ctx, e, workload{Conn: dsn, Clients: 4, Seconds: e.cfg.footprintSeconds, SelectOnly: true}); err != nil {
		return err
	}
	if err := measure("after_select_only", false); err != nil {
		return err
	}
	if _, err := runPgbench(ctx, e, workload{Conn: dsn, Clients: 4, Seconds: e.cfg.footprintSeconds}); err != nil {
		return err
	}
	if err := measure("after_tpcb", true); err != nil {
		return err
	}
	_, err := px.cli(ctx, "branch", "destroy", name)
	return err
}

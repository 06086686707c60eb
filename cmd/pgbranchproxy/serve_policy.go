package main

import (
	"fmt"
	"strings"

	"go.uber.org/zap"
)

// checkReserve refuses a --disk-reserve that leaves nothing of --disk-budget: every
// new branch would get 53100 once one branch owned a byte.
func checkReserve(f *serveFlags) error {
	p := f.policy
	if p.DiskBudget > 0 && p.DiskReserve >= p.DiskBudget {
		return fmt.Errorf("--disk-reserve %s leaves nothing of --disk-budget %s: give a smaller reserve or a larger budget",
			sizeText(p.DiskReserve), budgetText(f))
	}
	return nil
}

// logPolicy logs the lifecycle policy serve applies, its disk budget in bytes
// whatever it was written as (a percentage of the state directory's filesystem).
func logPolicy(log *zap.Logger, f *serveFlags) {
	p := f.policy
	fields := []zap.Field{
		zap.Duration("idle_stop", p.IdleStop), zap.Duration("ttl", p.TTL), zap.Duration("max_age", p.MaxAge),
		zap.Int64("quota_bytes", p.Quota), zap.String("quota_policy", p.QuotaPolicy),
		zap.Int64("disk_budget_bytes", p.DiskBudget), zap.Int64("disk_reserve_bytes", p.DiskReserve),
		zap.Int("max_running", p.MaxRunning), zap.Duration("reap_interval", f.reapInterval),
	}
	if p.DiskBudget > 0 {
		fields = append(fields, zap.String("disk_budget", budgetText(f)))
	}
	log.Info("lifecycle policy", fields...)
}

// budgetText is --disk-budget as given and, when that was a percentage, in bytes:
// "80% of the state directory's filesystem, 40.2GB".
func budgetText(f *serveFlags) string {
	if v := strings.TrimSpace(f.diskBudget); strings.HasSuffix(v, "%") {
		return v + " of the state directory's filesystem, " + sizeText(f.policy.DiskBudget)
	}
	return sizeText(f.policy.DiskBudget)
}

package branches

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// pruneEvery is how often the reaper deletes what the retention settings no longer
// keep: the logs grow by a few rows per branch event, so hourly is plenty.
const pruneEvery = time.Hour

// pruneLogs deletes transitions older than Policy.HistoryKeep and audit entries
// older than Policy.AuditKeep, at most once per pruneEvery. Only the reaper's loop
// calls it.
func (m *Manager) pruneLogs(ctx context.Context) {
	p := m.cfg.Policy
	now := m.now()
	if (p.HistoryKeep <= 0 && p.AuditKeep <= 0) || now.Sub(m.lastPrune) < pruneEvery {
		return
	}
	m.lastPrune = now
	if p.HistoryKeep > 0 {
		n, err := m.cat.PruneTransitions(ctx, now.Add(-p.HistoryKeep))
		m.logPrune("transitions", n, err)
	}
	if p.AuditKeep > 0 {
		n, err := m.cat.PruneAudit(ctx, now.Add(-p.AuditKeep))
		m.logPrune("audit entries", n, err)
	}
}

func (m *Manager) logPrune(what string, n int64, err error) {
	switch {
	case err != nil:
		m.log.Warn("prune the catalog's logs", zap.String("log", what), zap.Error(err))
	case n > 0:
		m.log.Info("pruned the catalog's logs", zap.String("log", what), zap.Int64("rows", n))
	}
}

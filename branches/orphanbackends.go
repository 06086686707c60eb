package branches

import (
	"context"

	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"go.uber.org/zap"
)

// endOrphans kills the Postgres processes a dead postmaster left working in dir
// (runtime.Orphans): a backend in a long query outlives its postmaster, and
// until it ends the branch's mount stays busy, so the branch could not start
// again, nor serve's next start unmount it. Its client is told 57P01 by the
// proxy. Only for a directory whose postmasters have exited.
func (m *Manager) endOrphans(ctx context.Context, dir string) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StopTimeout)
	defer cancel()
	n, err := runtime.KillOrphans(ctx, dir)
	switch {
	case err != nil:
		m.log.Warn("end backends a dead server left", zap.String("dir", dir), zap.Error(err))
	case n > 0:
		m.log.Warn("ended backends a dead server left running", zap.String("dir", dir), zap.Int("processes", n))
	}
}

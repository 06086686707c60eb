package branches

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/router"
	"go.uber.org/zap"
)

// KindBranch is a source seeded from a branch of another source (its Spec is
// "SOURCE/BRANCH"): the branch's whole data directory is copied online, as a fork
// copies a parent's layer, and settled like any other seed. A refresh copies the
// branch's state at that time.
const KindBranch = "branch"

// parseBranchSpec splits "SOURCE/BRANCH".
func parseBranchSpec(spec string) (source, name string, err error) {
	source, name, ok := strings.Cut(spec, "/")
	if !ok || !router.ValidBranchName(source) || !router.ValidBranchName(name) {
		return "", "", fmt.Errorf("%w: --from-branch %q: want SOURCE/BRANCH", ErrInvalid, spec)
	}
	return source, name, nil
}

// snapshotBranch copies the merged data directory of the branch spec names into dst
// while it runs (waking it if it was stopped), with the backup_label that makes the
// copy consistent. It refuses a branch that does not exist rather than creating it.
func (m *Manager) snapshotBranch(ctx context.Context, spec, dst string, progress func(string)) error {
	source, name, err := parseBranchSpec(spec)
	if err != nil {
		return err
	}
	m.mu.Lock()
	_, ok := m.branches[key{source, name}]
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("branch %q of source %q: %w", name, source, ErrNotFound)
	}
	progress("copying branch " + spec + " online")
	start := time.Now()
	lease, err := m.acquireExisting(ctx, router.Route{Branch: name, Options: router.Options{Source: source}})
	if err != nil {
		return fmt.Errorf("branch %q: %w", spec, err)
	}
	defer lease.Release()
	m.mu.Lock()
	rec := lease.b.rec
	m.mu.Unlock()
	sd, err := m.seedByID(rec.SeedID)
	if err != nil {
		return err
	}
	conn, err := superuserConn(ctx, sd, lease.Dial)
	if err != nil {
		return fmt.Errorf("connect to branch %q: %w", spec, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := m.onlineCopy(ctx, conn, sd.PGVersion, "pgbranchproxy seed from "+spec, m.layoutOf(rec.ID).data, dst); err != nil {
		return fmt.Errorf("copy branch %q: %w", spec, err)
	}
	m.log.Info("copied branch for a seed", zap.String("branch", spec), zap.Duration("took", time.Since(start)))
	return nil
}

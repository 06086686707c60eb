package branches

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"go.uber.org/zap"
)

// A warm pool member's server runs without autovacuum until a client claims it.
// Its launcher would start a worker, a backend fork, for each of its databases
// every autovacuum_naptime, for databases nobody writes to: with 200 members of a
// three-database seed, ten forks a second, which took a quarter of a 2-core
// machine. The member's postgresql.auto.conf (read after postgresql.conf, and
// below --pg-setting, which goes on the command line) gets a line that turns it
// off; a start of a branch that is not a member takes the line out, and so does
// a claimed branch's server autovacuumAfterClaim after its claim, with a reload.
// A short test's branch is gone by then and never pays for the reload.

// poolVacuumLine is the line, recognised by its comment.
const poolVacuumLine = "autovacuum = off # pgbranchproxy: a warm pool member, until claimed\n"

// autovacuumAfterClaim is how long a claimed branch's server waits for its autovacuum.
const autovacuumAfterClaim = 10 * time.Second

// poolVacuum puts the line in the server configuration of the branch whose data
// directory is dataDir (pooled), or takes it out, and reports whether the file
// changed. Nothing is done when --pg-setting sets autovacuum.
func (m *Manager) poolVacuum(dataDir string, pooled bool) (bool, error) {
	if _, set := m.cfg.Settings["autovacuum"]; set {
		return false, nil
	}
	path := filepath.Join(dataDir, "postgresql.auto.conf")
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	now := bytes.ReplaceAll(old, []byte(poolVacuumLine), nil)
	if pooled {
		now = append(now, poolVacuumLine...)
	}
	if bytes.Equal(now, old) {
		return false, nil
	}
	tmp := path + ".pgbranch"
	if err := os.WriteFile(tmp, now, 0o600); err != nil {
		return false, err
	}
	if err := os.Chown(tmp, m.cfg.User.UID, m.cfg.User.GID); err != nil {
		os.Remove(tmp)
		return false, err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return false, err
	}
	return true, nil
}

// autovacuumLater gives the server of b, just claimed, its autovacuum back after
// autovacuumAfterClaim (autovacuumOn).
func (m *Manager) autovacuumLater(b *branch) {
	m.mu.Lock()
	inst := b.inst
	m.mu.Unlock()
	if inst != nil {
		time.AfterFunc(autovacuumAfterClaim, func() { m.autovacuumOn(b, inst) })
	}
}

// autovacuumOn takes the line out of the configuration of b's server inst and
// has it reload, as an operation on b. Nothing is left to do when b is gone or
// ended, or inst no longer runs (a later start reads the file without the line);
// while another operation runs, it tries again later.
func (m *Manager) autovacuumOn(b *branch, inst runtime.Instance) {
	m.mu.Lock()
	switch {
	case m.closed, b.inst != inst, b.ended(), m.branches[key{b.rec.Source, b.rec.Name}] != b:
		m.mu.Unlock()
		return
	case b.op != nil:
		m.mu.Unlock()
		time.AfterFunc(autovacuumAfterClaim, func() { m.autovacuumOn(b, inst) })
		return
	}
	data, name := m.layoutOf(b.rec.ID).data, b.rec.Name
	m.startOp(b, "autovacuum", func(context.Context) error {
		changed, err := m.poolVacuum(data, false)
		if err == nil && changed {
			err = inst.Reload()
		}
		if err != nil {
			m.log.Warn("turn a claimed branch's autovacuum on", zap.String("branch", name), zap.Error(err))
		}
		return nil
	})
	m.mu.Unlock()
}

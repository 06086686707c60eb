package branches

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"go.uber.org/zap"
)

// A warm pool member's server runs without autovacuum until a client claims it.
// Its launcher would start a worker, a backend fork, for each of its databases
// every autovacuum_naptime, for databases nobody writes to: with 200 members of a
// three-database seed, ten forks a second, which took a quarter of a 2-core
// machine. A member starts with a configuration file of its own (config_file, in
// the branch's directory, not its data directory, so that ALTER SYSTEM and the
// branch's forks never see it): the data directory's postgresql.conf, included,
// and a line that turns autovacuum off. postgresql.auto.conf is read after it, and
// --pg-setting (the command line) above both. autovacuumAfterClaim after a claim,
// the line is commented out and the server reloads; a later start is not a
// member's and goes without the file. A short test's branch is gone by then and
// never pays for the reload.

// poolConfName is the member's configuration file, in the branch's directory.
const poolConfName = "pool.conf"

// poolVacuumLine turns autovacuum off; its first byte, a space, becomes '#' to
// turn the line into a comment, in place: the Docker runtime binds the file
// itself into the container, so it must stay the same file.
const poolVacuumLine = " autovacuum = off\t# until a client claims this warm pool member\n"

// autovacuumAfterClaim is how long a claimed branch's server waits for its autovacuum.
const autovacuumAfterClaim = 10 * time.Second

// poolConf writes the configuration file of a member whose branch directory is
// dir and data directory data, and returns its path; "" when --pg-setting sets
// autovacuum, whose command line would win anyway.
func (m *Manager) poolConf(dir, data string) (string, error) {
	if _, set := m.cfg.Settings["autovacuum"]; set {
		return "", nil
	}
	path := filepath.Join(dir, poolConfName)
	conf := fmt.Sprintf("# written by pgbranchproxy for a warm pool member\ninclude_if_exists '%s'\n%s",
		strings.ReplaceAll(filepath.Join(data, "postgresql.conf"), "'", "''"), poolVacuumLine)
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return "", err
	}
	// Root writes it, the Postgres user reads it: whatever the umask.
	return path, os.Chmod(path, 0o644)
}

// vacuumOn comments out the autovacuum line of the member configuration file at
// path, and reports whether it did (false: there is no such file, or the line is
// a comment already).
func vacuumOn(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	conf, err := io.ReadAll(f)
	if err != nil {
		return false, err
	}
	at := bytes.Index(conf, []byte(poolVacuumLine))
	if at < 0 {
		return false, nil
	}
	if _, err := f.WriteAt([]byte("#"), int64(at)); err != nil {
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

// autovacuumOn turns autovacuum on for b's server inst, unless b is gone or ended,
// or inst no longer runs (a later start has no member configuration). It is no
// operation on b: an operation in flight (a stop, a reset) takes inst away, and a
// reload of a server on its way out does no harm.
func (m *Manager) autovacuumOn(b *branch, inst runtime.Instance) {
	m.mu.Lock()
	if m.closed || b.inst != inst || b.ended() || m.branches[key{b.rec.Source, b.rec.Name}] != b {
		m.mu.Unlock()
		return
	}
	path, name := filepath.Join(m.layoutOf(b.rec.ID).dir, poolConfName), b.rec.Name
	m.mu.Unlock()
	changed, err := vacuumOn(path)
	if err == nil && changed {
		err = inst.Reload()
	}
	if err != nil && !errors.Is(err, runtime.ErrExited) {
		m.log.Warn("turn a claimed branch's autovacuum on", zap.String("branch", name), zap.Error(err))
	}
}

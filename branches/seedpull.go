package branches

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/seedcopy"
	"go.uber.org/zap"
)

// On a node of several, each node keeps its own copy of every seed it serves
// branches of (copyDir, named by the seed's id, which is never reused), and its
// branches mount that copy. The builder writes
// the seed's manifest (package seedcopy) beside its data when it settles, with
// the manifest's digest in the seed's row; another node fetches the seed from a
// node that holds it (SeedFetcher), checks it against the digest, and records its
// copy in the catalog, where fronts look for the nodes that hold a source's
// newest seed. Nodes fetch a source's newest seed at their reaper pass, ahead of
// demand, and at the latest when a branch of it is to start here.

// SeedFetcher copies a seed from another node (package peer's Client).
type SeedFetcher interface {
	Fetch(ctx context.Context, node, addr string, id int64, digest, dir string, uid, gid int) (seedcopy.Manifest, error)
}

// manifestFile is the seed's manifest, in its generation's directory.
func manifestFile(genDir string) string { return filepath.Join(genDir, "manifest.json") }

// copiesSeeds reports whether this node keeps its own copies of other nodes'
// seeds; without a fetcher, a node reads them where their builder put them (nodes
// on one disk).
func (m *Manager) copiesSeeds() bool { return m.cfg.Join && m.cfg.Seeds != nil }

// copied reports whether this node's branches of sd mount a copy: sd was built
// by another node, which serves it.
func (m *Manager) copied(sd catalog.Seed) bool {
	return m.copiesSeeds() && sd.NodeID != "" && !m.builtHere(sd)
}

// copyDir is the generation directory of this node's copy of sd.
func (m *Manager) copyDir(sd catalog.Seed) string {
	return filepath.Join(m.cfg.StateDir, "seeds", sd.Source, fmt.Sprintf("c%d", sd.ID))
}

// seedLayer is the directory that this node's branches of sd mount.
func (m *Manager) seedLayer(sd catalog.Seed) string {
	if m.copied(sd) {
		return filepath.Join(m.copyDir(sd), filepath.Base(sd.Dir))
	}
	return sd.Dir
}

// writeManifest lists a settled seed's generation directory and writes its
// manifest there, for the nodes that will copy it; it returns the digest.
func (m *Manager) writeManifest(sd catalog.Seed) (string, error) {
	gen := filepath.Dir(sd.Dir)
	man, err := seedcopy.Build(gen, m.cfg.User.UID)
	if err != nil {
		return "", err
	}
	if err := seedcopy.WriteFile(manifestFile(gen), man); err != nil {
		return "", err
	}
	return man.Digest(), nil
}

// ensureSeed makes sure this node holds sd before a branch of it starts here,
// fetching it from a node that does; concurrent callers share one fetch, which
// goes on if they give up.
func (m *Manager) ensureSeed(ctx context.Context, sd catalog.Seed) error {
	if !m.copied(sd) {
		return nil
	}
	if _, err := os.Stat(m.copyDir(sd)); err == nil {
		return nil
	}
	ch := m.fetches.DoChan(fmt.Sprint(sd.ID), func() (any, error) {
		return nil, m.fetchSeed(context.WithoutCancel(ctx), sd)
	})
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fetchSeed copies sd from the first live node that holds it and answers, and
// records the copy.
func (m *Manager) fetchSeed(ctx context.Context, sd catalog.Seed) error {
	gen := m.copyDir(sd)
	if _, err := os.Stat(gen); err == nil {
		return m.cat.AddSeedCopy(ctx, sd.ID) // fetched by the call before
	}
	srcs, err := m.seedSources(ctx, sd)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(gen), 0o700); err != nil {
		return err
	}
	start := time.Now()
	errs := []error{fmt.Errorf("%w: seed generation %d of %q is on no live node that serves it", ErrLayerMissing, sd.Generation, sd.Source)}
	for _, n := range srcs {
		man, err := m.cfg.Seeds.Fetch(ctx, n.ID, n.PeerAddr, sd.ID, sd.Manifest, gen, m.cfg.User.UID, m.cfg.User.GID)
		if err != nil {
			m.log.Warn("copy a seed from a node", zap.String("source", sd.Source), zap.Int("generation", sd.Generation),
				zap.String("from", n.ID), zap.Error(err))
			errs = append(errs, err)
			continue
		}
		if err := seedcopy.WriteFile(manifestFile(gen), man); err != nil {
			return err
		}
		files, size := man.Bytes()
		m.log.Info("copied a seed", zap.String("source", sd.Source), zap.Int("generation", sd.Generation),
			zap.String("from", n.ID), zap.Int("files", files), zap.Int64("bytes", size), zap.Duration("took", time.Since(start)))
		m.cfg.Metrics.took("seed_copy", time.Since(start))
		return m.cat.AddSeedCopy(ctx, sd.ID)
	}
	return errors.Join(errs...)
}

// seedSources lists the live nodes that hold sd and serve it to peers, its
// builder first.
func (m *Manager) seedSources(ctx context.Context, sd catalog.Seed) ([]catalog.Node, error) {
	holders, err := m.cat.SeedHolders(ctx, sd.ID)
	if err != nil {
		return nil, err
	}
	nodes, err := m.cat.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	me, _, _ := m.cat.Registration()
	var out []catalog.Node
	for _, h := range holders {
		for _, n := range nodes {
			if n.ID != h || n.ID == me || n.PeerAddr == "" || n.State == catalog.NodeDead || n.LeaseAge >= 0 {
				continue
			}
			if n.ID == sd.NodeID {
				out = append([]catalog.Node{n}, out...)
			} else {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// prefetchSeeds starts copying, in the background, each known source's newest
// seed that this node does not hold, so that the first branch of it here does
// not wait for the copy; and records the copies that are here but not in the
// catalog (a crash between the two).
func (m *Manager) prefetchSeeds(ctx context.Context) {
	if !m.copiesSeeds() {
		return
	}
	have, err := m.cat.SeedCopies(ctx)
	if err != nil {
		return
	}
	m.mu.Lock()
	var want []catalog.Seed
	for _, s := range m.sources {
		if s.seed != nil && m.copied(*s.seed) {
			want = append(want, *s.seed)
		}
	}
	m.mu.Unlock()
	for _, sd := range want {
		if _, err := os.Stat(m.copyDir(sd)); err == nil {
			if !slices.Contains(have, sd.ID) {
				m.cat.AddSeedCopy(ctx, sd.ID)
			}
			continue
		}
		go func() {
			if err := m.ensureSeed(context.WithoutCancel(ctx), sd); err != nil {
				m.log.Debug("copy a seed ahead of demand", zap.String("source", sd.Source), zap.Error(err))
			}
		}()
	}
}

// collectCopies removes this node's copies of seeds that are gone from the
// catalog or that used does not list, forgetting each in the catalog first.
func (m *Manager) collectCopies(ctx context.Context, seeds []catalog.Seed, used map[int64]bool) {
	if !m.copiesSeeds() {
		return
	}
	known := map[int64]bool{}
	for _, sd := range seeds {
		known[sd.ID] = true
	}
	dirs, _ := filepath.Glob(filepath.Join(m.cfg.StateDir, "seeds", "*", "c*"))
	for _, d := range dirs {
		id, err := strconv.ParseInt(strings.TrimPrefix(filepath.Base(d), "c"), 10, 64)
		if err != nil || used[id] && known[id] {
			continue // not a copy (a .part being written), or in use
		}
		if err := m.cat.DeleteSeedCopy(ctx, id); err != nil {
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			m.log.Warn("remove a seed copy", zap.String("dir", d), zap.Error(err))
			continue
		}
		m.log.Info("removed a copy of an unused seed", zap.String("dir", d))
	}
}

// SeedForPeer returns, for another node, the generation directory of the seed
// with id and its manifest: a seed this node built, or holds a copy of; an
// error wrapping fs.ErrNotExist for any other.
func (m *Manager) SeedForPeer(ctx context.Context, id int64) (string, seedcopy.Manifest, error) {
	var man seedcopy.Manifest
	seeds, err := m.cat.Seeds(ctx)
	if err != nil {
		return "", man, err
	}
	for _, sd := range seeds {
		if sd.ID != id || sd.State != catalog.SeedReady {
			continue
		}
		gen := filepath.Dir(sd.Dir)
		switch {
		case m.copied(sd):
			gen = m.copyDir(sd)
		case !m.builtHere(sd):
			return "", man, fmt.Errorf("seed %d is not on this node: %w", id, fs.ErrNotExist)
		}
		man, err := seedcopy.ReadFile(manifestFile(gen))
		if errors.Is(err, fs.ErrNotExist) && m.builtHere(sd) {
			// Settled before seeds had manifests: list it now.
			if _, err := m.writeManifest(sd); err != nil {
				return "", man, err
			}
			man, err = seedcopy.ReadFile(manifestFile(gen))
		}
		return gen, man, err
	}
	return "", man, fmt.Errorf("seed %d is not on this node: %w", id, fs.ErrNotExist)
}

// removePartialCopies removes the copies a crash left half written; reconcile
// calls it before any copy starts.
func (m *Manager) removePartialCopies() {
	parts, _ := filepath.Glob(filepath.Join(m.cfg.StateDir, "seeds", "*", "c*.part"))
	for _, p := range parts {
		m.log.Info("removing a seed copy left half written", zap.String("dir", p))
		os.RemoveAll(p)
	}
}

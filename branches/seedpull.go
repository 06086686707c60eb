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
	"golang.org/x/sync/singleflight"
)

// On a node of several, each node keeps its own copy of every seed it serves
// branches of (copyDir, named by the seed's id, which is never reused), and its
// branches mount that copy. The builder writes the seed's manifest (package
// seedcopy) beside its data when it settles, with the manifest's digest in the
// seed's row; another node fetches the seed from a node that holds it
// (SeedFetcher), checks it against the digest, and records its copy in the
// catalog, where fronts look for the nodes that hold a source's newest seed.
// Nodes fetch a source's newest seed at their reaper pass, ahead of demand, and
// at the latest when a branch of it is to start here.

// SeedFetcher copies a seed from another node (package peer's Client). Fetch
// must end when ctx does.
type SeedFetcher interface {
	Fetch(ctx context.Context, node, addr string, id int64, digest, dir string, uid, gid int) (seedcopy.Manifest, error)
}

// manifestFile is the seed's manifest, in its generation's directory.
func manifestFile(genDir string) string { return filepath.Join(genDir, "manifest.json") }

// copiesSeeds reports whether this node keeps its own copies of other nodes'
// seeds: a node of several with a fetcher (serve gives every node one; unit
// tests of nodes on one disk run without, reading seeds where they were built).
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
// fetching it from a node that does. The fetch is shared with every other
// caller and goes on if they give up; a caller that gives up gets ErrNotReady.
func (m *Manager) ensureSeed(ctx context.Context, sd catalog.Seed) error {
	if !m.copied(sd) {
		return nil
	}
	if _, err := os.Stat(m.copyDir(sd)); err == nil {
		return nil
	}
	select {
	case r := <-m.startFetch(sd):
		return r.Err
	case <-ctx.Done():
		return fmt.Errorf("%w: seed generation %d of %q is still being copied to this node: %v", ErrNotReady, sd.Generation, sd.Source, ctx.Err())
	}
}

// startFetch starts copying sd here unless a copy of it is under way, and
// returns the channel its result comes on (buffered: it need not be read).
func (m *Manager) startFetch(sd catalog.Seed) <-chan singleflight.Result {
	return m.fetches.DoChan(fmt.Sprint(sd.ID), func() (any, error) {
		m.mu.Lock()
		if m.fetching == nil {
			m.fetching = map[int64]bool{}
		}
		m.fetching[sd.ID] = true
		m.mu.Unlock()
		defer func() {
			m.mu.Lock()
			delete(m.fetching, sd.ID)
			m.mu.Unlock()
		}()
		err := m.fetchSeed(m.lifeCtx(), sd)
		if err != nil {
			m.log.Warn("copy a seed", zap.String("source", sd.Source), zap.Int("generation", sd.Generation), zap.Error(err))
		}
		return nil, err
	})
}

// lifeCtx ends when Close begins.
func (m *Manager) lifeCtx() context.Context {
	if m.life == nil {
		return context.Background()
	}
	return m.life
}

// fetchSeed copies sd from the first live node that holds it and answers, and
// records the copy.
func (m *Manager) fetchSeed(ctx context.Context, sd catalog.Seed) error {
	gen := m.copyDir(sd)
	if _, err := os.Stat(gen); err == nil {
		return nil // copied by the call before this one
	}
	srcs, err := m.seedSources(ctx, sd)
	if err != nil {
		return err
	}
	if len(srcs) == 0 {
		return fmt.Errorf("%w: seed generation %d of %q is on no live node that serves it", ErrLayerMissing, sd.Generation, sd.Source)
	}
	if err := os.MkdirAll(filepath.Dir(gen), 0o700); err != nil {
		return err
	}
	start := time.Now()
	var errs []error
	for _, n := range srcs {
		man, err := m.cfg.Seeds.Fetch(ctx, n.ID, n.PeerAddr, sd.ID, sd.Manifest, gen, m.cfg.User.UID, m.cfg.User.GID)
		if err != nil {
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
		// The copy is here and usable; a failed record is made at a reaper pass.
		if err := m.cat.AddSeedCopy(ctx, sd.ID); err != nil {
			m.log.Warn("record a seed copy", zap.Int64("seed", sd.ID), zap.Error(err))
		}
		return nil
	}
	return fmt.Errorf("%w: copy seed generation %d of %q: %w", ErrLayerMissing, sd.Generation, sd.Source, errors.Join(errs...))
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
	for _, n := range nodes {
		if !slices.Contains(holders, n.ID) || n.ID == me || n.PeerAddr == "" || n.State == catalog.NodeDead || n.LeaseAge >= 0 {
			continue
		}
		out = append(out, n)
	}
	rank := func(n catalog.Node) int {
		if n.ID == sd.NodeID {
			return 0 // the builder first
		}
		return 1
	}
	slices.SortStableFunc(out, func(a, b catalog.Node) int { return rank(a) - rank(b) })
	return out, nil
}

// prefetchSeeds starts copying each known source's newest seed that this node
// does not hold, so that the first branch of it here does not wait for the
// copy, and records the copies that are here but not in the catalog.
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
		if _, err := os.Stat(m.copyDir(sd)); err != nil {
			m.startFetch(sd)
		} else if !slices.Contains(have, sd.ID) {
			m.cat.AddSeedCopy(ctx, sd.ID)
		}
	}
}

// collectCopies removes this node's copies of seeds that are gone from the
// catalog, or that are not their source's newest and that no branch of this
// node uses (branches never move between nodes), forgetting each in the
// catalog first. all is every branch row of the catalog.
func (m *Manager) collectCopies(ctx context.Context, seeds []catalog.Seed, all []catalog.Branch) {
	if !m.copiesSeeds() {
		return
	}
	me, _, _ := m.cat.Registration()
	keep := map[int64]bool{}
	for _, sd := range catalog.NewestSeeds(seeds) {
		keep[sd.ID] = true
	}
	for _, b := range all {
		if b.NodeID == me {
			keep[b.SeedID] = true
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(m.cfg.StateDir, "seeds", "*", "c*"))
	for _, d := range dirs {
		id, err := strconv.ParseInt(strings.TrimPrefix(filepath.Base(d), "c"), 10, 64)
		if err != nil || keep[id] && slices.ContainsFunc(seeds, func(sd catalog.Seed) bool { return sd.ID == id }) {
			continue // not a copy (a .part being written), or kept
		}
		m.mu.Lock()
		busy := m.fetching[id] || m.seedInUseLocked(id)
		m.mu.Unlock()
		if busy {
			continue
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

// seedInUseLocked reports whether a branch this manager holds, or a source's
// current seed, is seed id. m.mu is held.
func (m *Manager) seedInUseLocked(id int64) bool {
	for _, b := range m.branches {
		if b.rec.SeedID == id {
			return true
		}
	}
	for _, s := range m.sources {
		if s.seed != nil && s.seed.ID == id {
			return true
		}
	}
	return false
}

// forgetMissingCopies removes from the catalog the copies it records for this
// node that are not on its disk (a state directory wiped or restored), so that
// no front places a branch here for them; reconcile calls it.
func (m *Manager) forgetMissingCopies(ctx context.Context, seeds []catalog.Seed) {
	if !m.copiesSeeds() {
		return
	}
	ids, err := m.cat.SeedCopies(ctx)
	if err != nil {
		return
	}
	for _, id := range ids {
		i := slices.IndexFunc(seeds, func(sd catalog.Seed) bool { return sd.ID == id })
		if i >= 0 {
			if _, err := os.Stat(m.copyDir(seeds[i])); err == nil {
				continue
			}
		}
		m.cat.DeleteSeedCopy(ctx, id)
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
	i := slices.IndexFunc(seeds, func(sd catalog.Seed) bool { return sd.ID == id && sd.State == catalog.SeedReady })
	switch {
	case i < 0:
		return "", man, fmt.Errorf("seed %d is not on this node: %w", id, fs.ErrNotExist)
	case m.copied(seeds[i]):
		gen := m.copyDir(seeds[i])
		man, err := seedcopy.ReadFile(manifestFile(gen))
		return gen, man, err
	case !m.builtHere(seeds[i]):
		return "", man, fmt.Errorf("seed %d is not on this node: %w", id, fs.ErrNotExist)
	}
	sd := seeds[i]
	gen := filepath.Dir(sd.Dir)
	man, err = seedcopy.ReadFile(manifestFile(gen))
	if errors.Is(err, fs.ErrNotExist) {
		// Settled before seeds had manifests: list it once, and record its digest.
		_, err, _ = m.fetches.Do("manifest:"+fmt.Sprint(id), func() (any, error) {
			if _, err := os.Stat(manifestFile(gen)); err == nil {
				return nil, nil
			}
			digest, err := m.writeManifest(sd)
			if err == nil && sd.Manifest == "" {
				sd.Manifest = digest
				err = m.cat.UpdateSeed(ctx, sd)
			}
			return nil, err
		})
		if err == nil {
			man, err = seedcopy.ReadFile(manifestFile(gen))
		}
	}
	return gen, man, err
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

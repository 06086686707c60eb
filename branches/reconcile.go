package branches

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/overlay"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"go.uber.org/zap"
)

// reconcile repairs what a crash or kill left behind, before anything is served:
// servers still running on this state directory are stopped, its mounts removed,
// half-built seeds and half-created branches rolled back, interrupted destroys and
// resets finished, and running branches recorded as stopped (the next connection
// wakes them). Only this node's rows (and lost ones) are its to repair; another
// node's rows, and their directories, which are on that node, are left alone.
func (m *Manager) reconcile(ctx context.Context) error {
	if err := m.stopStrayContainers(ctx); err != nil {
		return err
	}
	strays, err := runtime.FindPostmasters(m.cfg.StateDir)
	if err != nil {
		return err
	}
	for _, s := range strays {
		m.log.Warn("stopping server left running by a previous run", zap.Int("pid", s.PID), zap.String("data_dir", s.DataDir))
		sctx, cancel := context.WithTimeout(ctx, m.cfg.StopTimeout)
		err := runtime.StopStray(sctx, s.PID)
		cancel()
		if err != nil {
			m.log.Warn("stray server", zap.Int("pid", s.PID), zap.Error(err))
		}
	}
	m.endOrphans(ctx, m.cfg.StateDir)
	// The state directory may be a mount point itself (a volume): what serve
	// mounted is below it.
	mounts, err := overlay.MountsBelow(m.cfg.StateDir)
	if err != nil {
		return err
	}
	for _, mp := range mounts {
		m.log.Info("unmounting mount left by a previous run", zap.String("mount", mp))
		if err := overlay.Unmount(mp); err != nil {
			return err
		}
	}
	if err := m.reconcileSeeds(ctx); err != nil {
		return err
	}
	branches, err := m.cat.Branches(ctx)
	if err != nil {
		return err
	}
	if err := m.repairSeedIDs(ctx, branches); err != nil {
		return err
	}
	known := map[string]bool{}
	for _, rec := range branches {
		if !m.reconciles(rec) {
			continue
		}
		// An ephemeral branch whose sessions the crash ended is ended (burst.go).
		b := &branch{rec: rec, hadSession: rec.HadSession}
		l := m.layoutOf(rec.ID)
		known[strconv.FormatInt(rec.ID, 10)] = true
		switch rec.State {
		case catalog.Creating:
			os.RemoveAll(l.dir)
			if err := m.cat.DeleteBranch(ctx, rec, "reconcile: creation interrupted"); err != nil {
				return err
			}
			m.log.Info("rolled back interrupted creation", zap.String("branch", rec.Name))
			continue
		case catalog.Destroying:
			os.RemoveAll(l.dir)
			if err := m.cat.DeleteBranch(ctx, rec, "reconcile: finished interrupted destroy"); err != nil {
				return err
			}
			continue
		case catalog.Resetting:
			if err := m.clearUpper(rec.ID); err != nil {
				return err
			}
			rec.OwnedBytes = 0
			fallthrough
		case catalog.Running, catalog.Starting, catalog.Stopping:
			reason := fmt.Sprintf("reconcile: was %s when the previous run ended", rec.State)
			rec.State, rec.PID, rec.StateAt = catalog.Stopped, 0, m.now()
			if err := m.cat.UpdateBranch(ctx, rec, reason); err != nil {
				return err
			}
			b.rec = rec
		}
		m.branches[key{rec.Source, rec.Name}] = b
	}
	m.collectLayers(ctx)
	m.collectSeeds(ctx)
	// Directories no branch owns are leftovers of a creation whose row never landed.
	entries, _ := os.ReadDir(filepath.Join(m.cfg.StateDir, "branches"))
	for _, e := range entries {
		if !known[e.Name()] {
			m.log.Info("removing orphan branch directory", zap.String("dir", e.Name()))
			os.RemoveAll(filepath.Join(m.cfg.StateDir, "branches", e.Name()))
		}
	}
	return nil
}

// reconciles reports whether reconcile loads rec: a row of this node (registration
// adopted every row of no node), or of any node once declared lost, so that it is
// refused with ErrLost and can be destroyed here. Every row when this process has
// not registered.
func (m *Manager) reconciles(rec catalog.Branch) bool {
	me, _, ok := m.cat.Registration()
	return !ok || rec.NodeID == me || rec.NodeID == "" || rec.State == catalog.Lost
}

// reconcileSeeds drops seeds that never finished building (and sources left with
// none), and loads the newest ready seed of each source.
func (m *Manager) reconcileSeeds(ctx context.Context) error {
	m.removePartialCopies()
	sources, err := m.cat.Sources(ctx)
	if err != nil {
		return err
	}
	seeds, err := m.cat.Seeds(ctx)
	if err != nil {
		return err
	}
	for _, s := range sources {
		m.sources[s.Name] = &sourceState{src: s}
	}
	m.forgetMissingCopies(ctx, seeds)
	// On a node of several, a source whose first seed this node was building when
	// it stopped (the interrupted `source add` was this node's) is removed; one
	// with a seed kept, or another node's build, or no seed row yet (another
	// node's `source add` between its two writes) is not.
	kept, interrupted := map[string]bool{}, map[string]bool{}
	for _, sd := range seeds {
		if sd.State != catalog.SeedReady && m.cfg.Join && !m.builtHere(sd) {
			kept[sd.Source] = true
			continue // another node may be building it
		}
		if sd.State == catalog.SeedReady {
			kept[sd.Source] = true
		} else {
			interrupted[sd.Source] = true
		}
		if sd.State != catalog.SeedReady {
			m.log.Info("removing seed whose build was interrupted", zap.String("source", sd.Source), zap.Int("generation", sd.Generation))
			os.RemoveAll(m.buildDir(sd))
			os.RemoveAll(filepath.Dir(m.seedDir(sd)))
			if err := m.cat.DeleteSeed(ctx, sd.ID); err != nil {
				return err
			}
			continue
		}
		if st := m.sources[sd.Source]; st != nil {
			sd := sd
			st.seed = &sd // seeds come oldest first: the last ready one wins
		}
	}
	for name, st := range m.sources {
		if st.seed == nil && m.cfg.Join && (kept[name] || !interrupted[name]) {
			delete(m.sources, name) // its first seed is another node's to finish
			continue
		}
		if st.seed == nil {
			m.log.Info("removing source whose first seed never finished", zap.String("source", name))
			if err := m.cat.DeleteSource(ctx, name); err != nil {
				return err
			}
			os.RemoveAll(filepath.Join(m.cfg.StateDir, "seeds", name))
			delete(m.sources, name)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(m.cfg.StateDir, "build"))
	for _, e := range entries {
		os.RemoveAll(filepath.Join(m.cfg.StateDir, "build", e.Name()))
	}
	return nil
}

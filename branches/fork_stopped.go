package branches

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/overlay"
	"go.uber.org/zap"
)

// forkState is what forks share: the layers taken from stopped parents, reused while
// the parent stays stopped, and the layers being built. Guarded by Manager.mu; the
// zero value is ready.
type forkState struct {
	snapshots map[int64]forkSnapshot // by parent branch id
	building  map[string]bool        // layer directories not listed by any branch yet
}

// forkSnapshot is the layer list a child of a stopped parent gets. It is valid while
// the parent's state has not changed since (stateAt): a start, reset or destroy
// changes it.
type forkSnapshot struct {
	stateAt time.Time
	layers  []string
}

// forkStoppedLocked forks the stopped parent pb for the child b, reusing the layers
// an earlier child took from the same stopped state. m.mu is held and released.
func (m *Manager) forkStoppedLocked(ctx context.Context, b *branch, pb *branch) error {
	prec := pb.rec
	if s, ok := m.forks.snapshots[prec.ID]; ok && s.stateAt.Equal(prec.StateAt) {
		// Listing the layers under the lock keeps collectLayers off them.
		b.rec.Layers = s.layers
		m.mu.Unlock()
		m.log.Debug("forked parent layer", zap.String("branch", b.rec.Name), zap.String("parent", prec.Name),
			zap.String("how", "shared stopped snapshot"))
		return m.adopt(ctx, b, prec, s.layers, prec.Roles)
	}
	child := b.rec
	var layers []string
	// The operation keeps the parent stopped, and safe from reset and destroy, for the
	// length of the copy; further forks of it wait and then share the result.
	o := m.startOp(pb, "fork", func(ctx context.Context) error {
		var err error
		layers, err = m.snapshotStopped(ctx, prec, child)
		if err != nil {
			return err
		}
		m.mu.Lock()
		if m.forks.snapshots == nil {
			m.forks.snapshots = map[int64]forkSnapshot{}
		}
		m.forks.snapshots[prec.ID] = forkSnapshot{stateAt: prec.StateAt, layers: layers}
		b.rec.Layers = layers
		m.mu.Unlock()
		return nil
	})
	m.mu.Unlock()
	if err := wait(ctx, o); err != nil {
		return fmt.Errorf("fork stopped parent %q: %w", prec.Name, err)
	}
	return m.adopt(ctx, b, prec, layers, prec.Roles)
}

// snapshotStopped copies the upper layer of the stopped parent prec into a new layer
// for child and returns the child's layer list; it flattens when the chain would be
// too deep. The caller runs it as the parent's operation.
func (m *Manager) snapshotStopped(ctx context.Context, prec, child catalog.Branch) ([]string, error) {
	start := time.Now()
	upper := m.layoutOf(prec.ID).upper
	if _, err := os.Stat(upper); os.IsNotExist(err) {
		return prec.Layers, nil // never written to: the parent's layers are its state
	}
	layer, done, err := m.newLayer(child.ID)
	if err != nil {
		return nil, err
	}
	defer done()
	layers := append([]string{layer}, prec.Layers...)
	flat := m.mustFlatten(layers)
	if flat {
		mnt := filepath.Join(m.layoutOf(child.ID).dir, "flatten")
		if err := overlay.MountReadOnly(append([]string{upper}, prec.Layers...), mnt); err != nil {
			return nil, err
		}
		err := copyTree(ctx, mnt, layer)
		if uerr := overlay.Unmount(mnt); uerr != nil && err == nil {
			err = uerr
		}
		os.Remove(mnt)
		if err != nil {
			return nil, err
		}
		layers = []string{layer}
	} else if err := copyTree(ctx, upper, layer); err != nil {
		return nil, err
	}
	removeServerFiles(layer)
	m.log.Info("forked parent layer", zap.String("branch", child.Name), zap.String("parent", prec.Name),
		zap.String("how", "stopped"), zap.Bool("flattened", flat), zap.Int("layers", len(layers)),
		zap.Duration("took", time.Since(start)))
	return layers, nil
}

// newLayer makes an empty layer directory for the child with id and keeps it from
// collectLayers until done is called (by then a branch lists it, or it failed).
func (m *Manager) newLayer(id int64) (layer string, done func(), err error) {
	if err := os.MkdirAll(m.layersDir(), 0o700); err != nil {
		return "", nil, err
	}
	layer = filepath.Join(m.layersDir(), "b"+strconv.FormatInt(id, 10))
	m.mu.Lock()
	if m.forks.building == nil {
		m.forks.building = map[string]bool{}
	}
	m.forks.building[layer] = true
	m.mu.Unlock()
	os.RemoveAll(layer)
	return layer, func() {
		m.mu.Lock()
		delete(m.forks.building, layer)
		m.mu.Unlock()
	}, nil
}

// collectLayers removes fork layers no branch lists any more, and forgets the
// snapshots of parents that have changed state since.
func (m *Manager) collectLayers(ctx context.Context) {
	entries, err := os.ReadDir(m.layersDir())
	if err != nil {
		return
	}
	all, err := m.cat.Branches(ctx)
	if err != nil {
		return
	}
	used := map[string]bool{}
	for _, b := range all {
		for _, l := range b.Layers {
			used[l] = true
		}
	}
	m.mu.Lock()
	byID := map[int64]*branch{}
	for _, b := range m.branches {
		byID[b.rec.ID] = b
		for _, l := range b.rec.Layers {
			used[l] = true
		}
	}
	for id, s := range m.forks.snapshots {
		if p := byID[id]; p == nil || !p.rec.StateAt.Equal(s.stateAt) {
			delete(m.forks.snapshots, id)
			continue
		}
		for _, l := range s.layers {
			used[l] = true
		}
	}
	for l := range m.forks.building {
		used[l] = true
	}
	m.mu.Unlock()
	for _, e := range entries {
		p := filepath.Join(m.layersDir(), e.Name())
		if !used[p] {
			if err := os.RemoveAll(p); err != nil {
				m.log.Warn("remove unused layer", zap.String("layer", e.Name()), zap.Error(err))
			}
		}
	}
}

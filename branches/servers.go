package branches

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"go.uber.org/zap"
)

// Labels a branch server carries under a container runtime, besides the runtime's own.
const (
	LabelSource = "pgbranchproxy.source"
	LabelBranch = "pgbranchproxy.branch"
)

// imageChecker is implemented by runtimes that run servers from images.
type imageChecker interface {
	CheckImage(ctx context.Context, image string) error
	DefaultImage() string
}

// limitChecker is implemented by runtimes that know limits their servers could not
// start with before one tries (more CPUs than the Docker Engine's host has).
type limitChecker interface {
	CheckLimits(ctx context.Context, l runtime.Limits) error
}

// serverRenamer is implemented by instances that a name outside serve shows
// (a container's, in docker ps).
type serverRenamer interface {
	Rename(ctx context.Context, name string) error
}

// strayStopper is implemented by runtimes that can find the servers a previous run
// of this state directory left behind by themselves (containers labelled with it).
type strayStopper interface {
	StopStrays(ctx context.Context, timeout time.Duration) (int, error)
}

// ServerLimits are the resource caps of one branch's server where the runtime
// applies them (the Docker runtime's cgroup limits). A nil field is left as it is.
type ServerLimits struct {
	MemoryBytes *int64   `json:"memory_bytes,omitempty"`
	CPUs        *float64 `json:"cpus,omitempty"`
	PIDs        *int64   `json:"pids,omitempty"`
}

// limitDefaulter is implemented by runtimes with limits of their own for servers
// whose spec leaves one zero (serve's --branch-memory and the like).
type limitDefaulter interface {
	DefaultLimits() runtime.Limits
}

// ServerView is, under a container runtime, what a source's or a branch's server
// starts with: its image and cgroup limits, each the branch's own, else its
// source's, else the runtime's default (a branch's image is always its source's).
// A running server keeps what it started with until its next start. The zero
// value (no image, no limits) is what other runtimes show.
type ServerView struct {
	Image       string  `json:"image,omitempty"`
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	CPUs        float64 `json:"cpus,omitempty"`
	PIDs        int64   `json:"pids,omitempty"`
}

// serverViews reads what listings show of sources' and branches' servers; ok is
// false under a runtime that runs no images, or when the catalog does not answer
// within holdersTimeout (logged), and the listing then shows none.
func (m *Manager) serverViews() (_ serverViews, ok bool) {
	c, ok := m.cfg.Runtime.(imageChecker)
	if !ok {
		return serverViews{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), holdersTimeout)
	defer cancel()
	t, err := m.cat.AllServerSettings(ctx)
	if err != nil {
		m.log.Warn("read server settings for a listing", zap.Error(err))
		return serverViews{}, false
	}
	v := serverViews{table: t, image: c.DefaultImage()}
	if d, ok := m.cfg.Runtime.(limitDefaulter); ok {
		v.limits = d.DefaultLimits()
	}
	return v, true
}

// serverViews is every recorded server setting and the runtime's defaults.
type serverViews struct {
	table  catalog.ServerSettingsTable
	image  string
	limits runtime.Limits
}

// source is what the servers of source's branches with no limits of their own start with.
func (v serverViews) source(source string) ServerView {
	s := v.table.Of(source, "", time.Time{})
	return ServerView{
		Image:       cmp.Or(s.Image, v.image),
		MemoryBytes: cmp.Or(s.MemoryBytes, v.limits.MemoryBytes),
		CPUs:        cmp.Or(s.CPUs, v.limits.CPUs),
		PIDs:        cmp.Or(s.PIDs, v.limits.PIDs),
	}
}

// branch is what the server of a branch (of that creation time) starts with.
func (v serverViews) branch(source, name string, created time.Time) ServerView {
	src := v.source(source)
	b := v.table.Of(source, name, created)
	return ServerView{
		Image:       src.Image,
		MemoryBytes: cmp.Or(b.MemoryBytes, src.MemoryBytes),
		CPUs:        cmp.Or(b.CPUs, src.CPUs),
		PIDs:        cmp.Or(b.PIDs, src.PIDs),
	}
}

// checkImage fails when the runtime runs images and image is not there.
func (m *Manager) checkImage(ctx context.Context, image string) error {
	if c, ok := m.cfg.Runtime.(imageChecker); ok {
		if err := c.CheckImage(ctx, image); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	return nil
}

// stopStrayContainers removes what a previous run left in a container runtime.
func (m *Manager) stopStrayContainers(ctx context.Context) error {
	s, ok := m.cfg.Runtime.(strayStopper)
	if !ok {
		return nil
	}
	n, err := s.StopStrays(ctx, m.cfg.StopTimeout)
	if n > 0 {
		m.log.Info("removed containers left by a previous run", zap.Int("containers", n))
	}
	return err
}

// sourceImage is the image a source's seeds and servers run in ("" for the runtime's default).
func (m *Manager) sourceImage(ctx context.Context, source string) string {
	s, err := m.cat.ServerSettingsOf(ctx, source, "", time.Time{})
	if err != nil {
		m.log.Warn("read source server settings", zap.String("source", source), zap.Error(err))
	}
	return s.Image
}

// serverName is the runtime's name of a branch's server (runtime.Spec.Name).
func serverName(source, branch string) string { return "pgbranch-" + source + "-" + branch }

// renameServer gives the server of b, a pool member claimed as k, its branch's
// name where the runtime shows one (docker ps), in the background: the claim
// does not wait for the Engine. A server that exits meanwhile keeps its name.
func (m *Manager) renameServer(b *branch, k key) {
	m.mu.Lock()
	r, ok := b.inst.(serverRenamer)
	m.mu.Unlock()
	if !ok {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Rename(ctx, serverName(k.source, k.name)); err != nil {
			m.log.Debug("rename a claimed branch's server", zap.String("branch", k.name), zap.Error(err))
		}
	}()
}

// placeServer sets the image, limits and labels of a branch's server: the branch's
// own limits, else its source's, else the runtime's defaults.
func (m *Manager) placeServer(ctx context.Context, rec catalog.Branch, spec *runtime.Spec) error {
	src, err := m.cat.ServerSettingsOf(ctx, rec.Source, "", time.Time{})
	if err != nil {
		return err
	}
	br, err := m.cat.ServerSettingsOf(ctx, rec.Source, rec.Name, rec.CreatedAt)
	if err != nil {
		return err
	}
	spec.Image = src.Image
	spec.Limits = runtime.Limits{
		MemoryBytes: cmp.Or(br.MemoryBytes, src.MemoryBytes),
		CPUs:        cmp.Or(br.CPUs, src.CPUs),
		PIDs:        cmp.Or(br.PIDs, src.PIDs),
	}
	spec.Labels = map[string]string{LabelSource: rec.Source, LabelBranch: rec.Name}
	return nil
}

// SetLimits records a branch's own server limits (zero: its source's); they apply
// from the server's next start.
func (m *Manager) SetLimits(ctx context.Context, source, name string, l ServerLimits) error {
	source, err := m.sourceOfBranch(source, name)
	if err != nil {
		return err
	}
	if err := m.checkLimits(deref(l.MemoryBytes), deref(l.CPUs), deref(l.PIDs)); err != nil {
		return err
	}
	if err := m.checkEngineLimits(ctx, deref(l.CPUs)); err != nil {
		return err
	}
	m.mu.Lock()
	b := m.branches[key{source, name}]
	var rec catalog.Branch
	if b != nil {
		rec = b.rec
	}
	m.mu.Unlock()
	if b == nil {
		return fmt.Errorf("branch %q of source %q: %w", name, source, ErrNotFound)
	}
	// One statement: two changes at once each keep the other's fields.
	return m.cat.PatchServerSettings(ctx, source, name, rec.CreatedAt,
		catalog.ServerSettingsPatch{MemoryBytes: l.MemoryBytes, CPUs: l.CPUs, PIDs: l.PIDs})
}

// addSourceServer checks a new source's image and records its server settings; on
// error the source is removed again.
func (m *Manager) addSourceServer(ctx context.Context, source string, s catalog.ServerSettings) error {
	err := m.checkLimits(s.MemoryBytes, s.CPUs, s.PIDs)
	if err == nil {
		err = m.checkEngineLimits(ctx, s.CPUs)
	}
	if err == nil {
		err = m.checkImage(ctx, s.Image)
	}
	if c, ok := m.cfg.Runtime.(imageChecker); ok && s.Image == "" {
		// The image the seed is built with is the source's for good: a later
		// serve --image (another major) must not open its seed.
		s.Image = c.DefaultImage()
	}
	if err == nil {
		err = m.cat.SetServerSettings(ctx, source, "", time.Time{}, s)
	}
	if err != nil {
		if derr := m.cat.DeleteSource(context.WithoutCancel(ctx), source); derr != nil {
			m.log.Error("remove failed source", zap.Error(derr))
		}
	}
	return err
}

// checkLimits refuses server limits no server could start with, or run under
// with the servers' settings (--pg-setting): a server would fail with them only at
// a session or a heavy statement. Zero is "not set". (More CPUs than the Engine's
// host has are checkEngineLimits'.)
func (m *Manager) checkLimits(memory int64, cpus float64, pids int64) error {
	l := runtime.Limits{MemoryBytes: memory, CPUs: cpus, PIDs: pids}
	if err := l.Check(m.cfg.Settings); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// checkEngineLimits refuses a CPU limit the runtime says no server could start
// with (more CPUs than the Docker Engine's host, which may not be this one, has).
func (m *Manager) checkEngineLimits(ctx context.Context, cpus float64) error {
	c, ok := m.cfg.Runtime.(limitChecker)
	if !ok || cpus == 0 {
		return nil
	}
	if err := c.CheckLimits(ctx, runtime.Limits{CPUs: cpus}); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

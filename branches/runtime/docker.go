package runtime

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"go.uber.org/zap"
)

// Labels every container of this runtime carries.
const (
	LabelInstance = "pgbranchproxy.instance" // the state directory's instance id
	LabelName     = "pgbranchproxy.name"     // Spec.Name
	LabelLog      = "pgbranchproxy.log"      // a server's Spec.LogFile
)

// engineLogConfig keeps the Engine's own copy of a container's output bounded:
// serve writes a server's output to its log file (which the manager rotates) and a
// job's to whoever ran it, and the Engine's copy is read only for what a server
// wrote while no serve followed it (saveStrayLog). The Engine's default json-file
// log grows without end, for as long as the container lives.
var engineLogConfig = container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "10m", "max-file": "1"}}

// DockerConfig configures a Docker runtime.
type DockerConfig struct {
	// Client talks to the Docker Engine. Required.
	Client *client.Client
	// Image is the image of servers and jobs that name none. Required.
	Image string
	// Instance is the state directory's instance id; every container is labelled with
	// it, so that a later run can find what an earlier one left. Required.
	Instance string
	// User owns the data directories; containers run as its numeric ids. Required.
	User OSUser
	// WorkDir is where the runtime keeps files it mounts into containers. Required.
	WorkDir string
	// Limits applies to servers whose Spec leaves a limit zero, field by field.
	Limits Limits
	// ShmSize is the size of a server's /dev/shm (default 256 MiB).
	ShmSize int64
}

// Docker runs every server and job in its own container, from the image the spec or
// job names, through the Docker Engine API. Data, socket and configuration files are
// bind-mounted at the paths they have on the host, so a server in a container is
// reached on the same unix socket as a local one. The zero value is not usable; call
// NewDocker. Safe for concurrent use.
type Docker struct {
	cfg DockerConfig
	cli *client.Client
	log *zap.Logger

	mu     sync.Mutex
	shimOK map[string]bool // image + "\x00" + shim path: whether the image's libc loads the shim
}

// NewDocker checks cfg and the Engine and returns a runtime.
func NewDocker(ctx context.Context, cfg DockerConfig, log *zap.Logger) (*Docker, error) {
	if cfg.Client == nil || cfg.Image == "" || cfg.Instance == "" || cfg.WorkDir == "" || cfg.User.UID == 0 {
		return nil, errors.New("docker runtime: Client, Image, Instance, WorkDir and a non-root User are required")
	}
	if cfg.ShmSize <= 0 {
		cfg.ShmSize = 256 << 20
	}
	if _, err := cfg.Client.Ping(ctx); err != nil {
		return nil, fmt.Errorf("docker runtime: the Docker Engine does not answer: %w", err)
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return nil, err
	}
	// initdb needs a name for the user it runs as; images know only their own users.
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\npostgres:x:%d:%d::/tmp:/bin/sh\n", cfg.User.UID, cfg.User.GID)
	if err := os.WriteFile(filepath.Join(cfg.WorkDir, "passwd"), []byte(passwd), 0o644); err != nil {
		return nil, err
	}
	return &Docker{cfg: cfg, cli: cfg.Client, log: log, shimOK: map[string]bool{}}, nil
}

// User implements Runner.
func (d *Docker) User() OSUser { return d.cfg.User }

// CheckImage returns an error that says what to do when image is not on the Engine.
// "" is the runtime's default image (Config.Image).
func (d *Docker) CheckImage(ctx context.Context, image string) error {
	image = cmp.Or(image, d.cfg.Image)
	if _, err := d.cli.ImageInspect(ctx, image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return imageMissing(image)
		}
		return fmt.Errorf("inspect image %q: %w", image, err)
	}
	return nil
}

// imageMissing says what to do about an image the Engine does not have.
func imageMissing(image string) error {
	return fmt.Errorf("image %q is not on the Docker Engine: build it (make image) or pull it (docker pull %s)", image, image)
}

// CheckLimits returns an error for limits the Engine would refuse a server at its
// start: more CPUs than the Engine's host has. An Engine that does not say how
// many it has passes them (its start says so).
func (d *Docker) CheckLimits(ctx context.Context, l Limits) error {
	if l.CPUs == 0 {
		return nil
	}
	info, err := d.cli.Info(ctx)
	if err != nil || info.NCPU <= 0 {
		return nil
	}
	if l.CPUs > float64(info.NCPU) {
		return fmt.Errorf("%g cpus: the Docker Engine's host has %d", l.CPUs, info.NCPU)
	}
	return nil
}

// binDir is where an image laid out like the official postgres images keeps the
// programs of a major version.
func binDir(version string) string { return "/usr/lib/postgresql/" + version + "/bin" }

// Start implements Runtime: one container per server, NetworkMode none, running as
// the data directory's owner, with the spec's limits as its cgroup limits.
func (d *Docker) Start(ctx context.Context, spec Spec) (Instance, error) {
	if spec.Version == "" {
		return nil, errors.New("docker runtime: the server's major version is required")
	}
	image := cmp.Or(spec.Image, d.cfg.Image)
	binds := []string{spec.DataDir + ":" + spec.DataDir, spec.SocketDir + ":" + spec.SocketDir}
	for _, k := range []string{"hba_file", "ident_file", "config_file"} {
		if f := spec.Settings[k]; f != "" {
			binds = append(binds, f+":"+f+":ro")
		}
	}
	env, shimBinds := d.preload(ctx, image, spec.Version, spec.Env)
	binds = append(binds, shimBinds...)
	labels := map[string]string{LabelInstance: d.cfg.Instance, LabelName: spec.Name, LabelLog: spec.LogFile}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	limits := Limits{
		MemoryBytes: cmp.Or(spec.Limits.MemoryBytes, d.cfg.Limits.MemoryBytes),
		CPUs:        cmp.Or(spec.Limits.CPUs, d.cfg.Limits.CPUs),
		PIDs:        cmp.Or(spec.Limits.PIDs, d.cfg.Limits.PIDs),
	}
	cfg := &container.Config{
		Image:        image,
		User:         fmt.Sprintf("%d:%d", d.cfg.User.UID, d.cfg.User.GID),
		Entrypoint:   []string{binDir(spec.Version) + "/postgres"},
		Cmd:          serverArgs(spec),
		Env:          append([]string{"LANG=C.UTF-8"}, env...),
		Labels:       labels,
		AttachStdout: true,
		AttachStderr: true,
		StopSignal:   "SIGINT", // docker stop: a fast shutdown, not a smart one that waits for clients
	}
	host := &container.HostConfig{
		NetworkMode: "none",
		Binds:       binds,
		ShmSize:     d.cfg.ShmSize,
		Resources:   resources(limits),
		LogConfig:   engineLogConfig,
	}
	logf, err := os.OpenFile(spec.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open server log: %w", err)
	}
	c, err := d.create(ctx, cfg, host, spec.Name)
	if err != nil {
		logf.Close()
		return nil, err
	}
	inst := &ctr{d: d, id: c, done: make(chan struct{}), socket: filepath.Join(spec.SocketDir, ".s.PGSQL.5432")}
	att, err := d.cli.ContainerAttach(ctx, c, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		logf.Close()
		d.remove(c)
		return nil, fmt.Errorf("attach to container: %w", err)
	}
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		_, _ = stdcopy.StdCopy(logf, logf, att.Reader)
		att.Close()
		logf.Close()
	}()
	// Wait for the next exit before the start, so that an early exit is not missed
	// and a container not yet started does not count as exited.
	waitC, errC := d.cli.ContainerWait(context.Background(), c, container.WaitConditionNextExit)
	go inst.wait(waitC, errC, logged)
	if err := d.cli.ContainerStart(ctx, c, container.StartOptions{}); err != nil {
		att.Close()
		d.remove(c)
		return nil, fmt.Errorf("start container for %s: %w", spec.Name, err)
	}
	if info, err := d.cli.ContainerInspect(ctx, c); err == nil && info.State != nil {
		inst.pid = info.State.Pid
	}
	// The postmaster is the container's first process: pid 1 in its namespace.
	if err := waitReady(ctx, spec.DataDir, 1, inst.done); err != nil {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = inst.Stop(stopCtx)
		if errors.Is(err, ErrExited) && inst.oom {
			return nil, fmt.Errorf("%w: killed by the kernel at its memory limit of %d bytes: raise --branch-memory (of the branch, its source or serve)", err, limits.MemoryBytes)
		}
		if errors.Is(err, ErrExited) {
			return nil, fmt.Errorf("%w: %s", err, LogTail(spec.LogFile, 5))
		}
		return nil, err
	}
	return inst, nil
}

// resources turns limits into cgroup limits; swap is not given on top of memory.
func resources(l Limits) container.Resources {
	var r container.Resources
	if l.MemoryBytes > 0 {
		r.Memory, r.MemorySwap = l.MemoryBytes, l.MemoryBytes
	}
	if l.CPUs > 0 {
		r.NanoCPUs = int64(l.CPUs * 1e9)
	}
	if l.PIDs > 0 {
		pids := l.PIDs
		r.PidsLimit = &pids
	}
	return r
}

// create creates a container named after name (containerName).
func (d *Docker) create(ctx context.Context, cfg *container.Config, host *container.HostConfig, name string) (string, error) {
	c, err := d.cli.ContainerCreate(ctx, cfg, host, nil, nil, containerName(name))
	if cerrdefs.IsNotFound(err) {
		// Removed since its source was added: say so as source add would.
		return "", fmt.Errorf("create container: %w", imageMissing(cfg.Image))
	}
	if err != nil {
		return "", fmt.Errorf("create container from %s: %w", cfg.Image, err)
	}
	return c.ID, nil
}

// containerName is name and a random suffix: names must be unique on the Engine,
// and several state directories may share it.
func containerName(name string) string {
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	return cmp.Or(name, "pgbranch") + "-" + hex.EncodeToString(suffix[:])
}

// remove removes a container, stopping it first if it runs.
func (d *Docker) remove(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		d.log.Warn("remove container", zap.String("container", shortID(id)), zap.Error(err))
	}
}

func shortID(id string) string { return id[:min(12, len(id))] }

// ctr is a Postgres server in a container started by Docker.
type ctr struct {
	d      *Docker
	id     string
	pid    int
	socket string
	done   chan struct{}
	oom    bool // the kernel killed it at its memory limit; set before done closes
}

func (c *ctr) PID() int              { return c.pid }
func (c *ctr) SocketPath() string    { return c.socket }
func (c *ctr) Done() <-chan struct{} { return c.done }

// wait closes done once the container has exited, its output is in the log and the
// container is removed.
func (c *ctr) wait(waitC <-chan container.WaitResponse, errC <-chan error, logged <-chan struct{}) {
	defer close(c.done)
	select {
	case <-waitC:
	case err := <-errC:
		c.d.log.Warn("wait for container", zap.String("container", shortID(c.id)), zap.Error(err))
	}
	if info, err := c.d.cli.ContainerInspect(context.Background(), c.id); err == nil && info.State != nil && info.State.OOMKilled {
		c.oom = true
		c.d.log.Warn("container hit its memory limit", zap.String("container", shortID(c.id)),
			zap.String("name", info.Config.Labels[LabelName]))
	}
	select {
	case <-logged:
	case <-time.After(5 * time.Second):
	}
	c.d.remove(c.id)
}

// Stop sends SIGINT (fast shutdown), then SIGQUIT and SIGKILL if ctx ends before the
// container exits, as the process runtime does.
func (c *ctr) Stop(ctx context.Context) error {
	select {
	case <-c.done:
		return nil
	default:
	}
	c.kill("SIGINT")
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
	}
	c.kill("SIGQUIT")
	select {
	case <-c.done:
		return fmt.Errorf("container %s needed an immediate shutdown", shortID(c.id))
	case <-time.After(5 * time.Second):
	}
	c.kill("SIGKILL")
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("container %s did not exit after SIGKILL", shortID(c.id))
	}
	return fmt.Errorf("container %s had to be killed", shortID(c.id))
}

// Discard sends SIGQUIT (immediate shutdown) to the container's postmaster, then
// SIGKILL if ctx ends before it exits.
func (c *ctr) Discard(ctx context.Context) error {
	select {
	case <-c.done:
		return nil
	default:
	}
	c.kill("SIGQUIT")
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
	}
	c.kill("SIGKILL")
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("container %s did not exit after SIGKILL", shortID(c.id))
	}
	return fmt.Errorf("container %s had to be killed", shortID(c.id))
}

// Rename names the container after name, as Start does, for a server that serves
// another branch from now on (a warm pool member claimed): docker ps then shows
// the branch's name. Labels cannot change: they keep the ones it started with.
func (c *ctr) Rename(ctx context.Context, name string) error {
	return c.d.cli.ContainerRename(ctx, c.id, containerName(name))
}

// Reload sends SIGHUP to the container's postmaster.
func (c *ctr) Reload() error {
	select {
	case <-c.done:
		return ErrExited
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.d.cli.ContainerKill(ctx, c.id, "SIGHUP")
}

func (c *ctr) kill(sig string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.d.cli.ContainerKill(ctx, c.id, sig); err != nil && !cerrdefs.IsNotFound(err) {
		c.d.log.Debug("signal container", zap.String("container", shortID(c.id)), zap.String("signal", sig), zap.Error(err))
	}
}

// DefaultImage is the image of servers whose spec names none (Config.Image).
func (d *Docker) DefaultImage() string { return d.cfg.Image }

// DefaultLimits are the limits of servers whose spec leaves them zero (Config.Limits).
func (d *Docker) DefaultLimits() Limits { return d.cfg.Limits }

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	docker "github.com/docker/docker/client"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"github.com/pgbranchproxy/pgbranchproxy/branches/seed"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
)

// runtimeFlags choose where branch servers run.
type runtimeFlags struct {
	kind   string
	image  string
	limits runtime.Limits
}

// DefaultImage is the image --runtime docker runs when --image is not given: the one
// `make image` builds.
const DefaultImage = "pgbranchproxy/postgres:15"

func addRuntimeFlags(fl *pflag.FlagSet, f *runtimeFlags) {
	fl.StringVar(&f.kind, "runtime", "process", "where branch servers run: process (on this host, as --pg-user) or docker (a container each, through the Docker Engine API)")
	fl.StringVar(&f.image, "image", DefaultImage, "--runtime docker: image of sources that name none (source add --image)")
	addLimitFlags(fl, &f.limits)
}

// addLimitFlags adds --branch-memory, --branch-cpus and --branch-pids.
func addLimitFlags(fl *pflag.FlagSet, l *runtime.Limits) {
	fl.Var(sizeFlag{&l.MemoryBytes}, "branch-memory", "--runtime docker: memory of each branch server (e.g. 512MB; at least its shared_buffers and maintenance_work_mem, 192MB with Postgres's defaults); the kernel kills a server that needs more (0: not set here: a branch takes its source's, a source serve's; none when none is set)")
	fl.Float64Var(&l.CPUs, "branch-cpus", 0, "--runtime docker: CPUs of each branch server (e.g. 0.5; 0: not set here, as for --branch-memory)")
	fl.Int64Var(&l.PIDs, "branch-pids", 0, "--runtime docker: processes of each branch server, at least 8 (the postmaster, its helpers and a session) and one more a session (0: not set here, as for --branch-memory)")
}

// checkLimitFlags refuses serve's --branch-memory, --branch-cpus and --branch-pids
// when no branch server with settings (--pg-setting) could run under them, or when
// the runtime would not apply them: a server would fail only later, at a session
// or a heavy statement, or never be limited at all.
func checkLimitFlags(f runtimeFlags, settings map[string]string) error {
	if f.limits.IsZero() {
		return nil
	}
	if f.kind != "docker" {
		return fmt.Errorf("--branch-memory, --branch-cpus and --branch-pids are the limits of containers: give them with --runtime docker (--runtime %s runs branch servers without limits)", f.kind)
	}
	for _, c := range []struct {
		flag   string
		limits runtime.Limits
	}{
		{"--branch-memory", runtime.Limits{MemoryBytes: f.limits.MemoryBytes}},
		{"--branch-cpus", runtime.Limits{CPUs: f.limits.CPUs}},
		{"--branch-pids", runtime.Limits{PIDs: f.limits.PIDs}},
	} {
		if err := c.limits.Check(settings); err != nil {
			return fmt.Errorf("%s: %w", c.flag, err)
		}
	}
	return nil
}

// newRuntime returns the runtime f asks for.
func newRuntime(ctx context.Context, f runtimeFlags, stateDir string, bins runtime.Binaries, user runtime.OSUser, log *zap.Logger) (seed.Runtime, error) {
	switch f.kind {
	case "process":
		if _, err := bins.Find(""); err != nil {
			return nil, err
		}
		return runtime.NewProcess(bins, user, log), nil
	case "docker":
		cli, err := docker.NewClientWithOpts(docker.FromEnv, docker.WithAPIVersionNegotiation())
		if err != nil {
			return nil, fmt.Errorf("docker client: %w", err)
		}
		id, err := instanceID(stateDir)
		if err != nil {
			return nil, err
		}
		d, err := runtime.NewDocker(ctx, runtime.DockerConfig{
			Client: cli, Image: f.image, Instance: id, User: user,
			WorkDir: filepath.Join(stateDir, "docker"), Limits: f.limits,
		}, log)
		if err != nil {
			return nil, err
		}
		if err := d.CheckImage(ctx, f.image); err != nil {
			return nil, fmt.Errorf("--image: %w", err)
		}
		if err := d.CheckLimits(ctx, f.limits); err != nil {
			return nil, fmt.Errorf("--branch-cpus: %w", err)
		}
		return d, nil
	}
	return nil, fmt.Errorf("--runtime %q: want process or docker", f.kind)
}

// instanceID is the state directory's id, made on first use: containers are
// labelled with it so that the next run finds what this one left.
func instanceID(stateDir string) (string, error) {
	path := filepath.Join(stateDir, "instance-id")
	b, err := os.ReadFile(path)
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(raw[:])
	if err := os.WriteFile(path, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("write instance id: %w", err)
	}
	return id, nil
}

// addSourceServerFlags adds source add's --image and limit flags.
func addSourceServerFlags(fl *pflag.FlagSet, s *catalog.ServerSettings) {
	fl.StringVar(&s.Image, "image", "", "--runtime docker: image its seeds and servers run in (default: serve's --image)")
	fl.Var(sizeFlag{&s.MemoryBytes}, "branch-memory", "--runtime docker: memory of each of its branch servers (default: serve's)")
	fl.Float64Var(&s.CPUs, "branch-cpus", 0, "--runtime docker: CPUs of each of its branch servers (default: serve's)")
	fl.Int64Var(&s.PIDs, "branch-pids", 0, "--runtime docker: processes of each of its branch servers (default: serve's)")
}

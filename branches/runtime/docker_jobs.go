package runtime

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/pkg/stdcopy"
	"go.uber.org/zap"
)

// Run implements Runner: the program runs in a container of its own, removed when it
// exits, with job.Paths bind-mounted at their host paths.
func (d *Docker) Run(ctx context.Context, job Job) error {
	prog := job.Prog
	if job.Version != "" {
		prog = binDir(job.Version) + "/" + job.Prog
	}
	binds := []string{filepath.Join(d.cfg.WorkDir, "passwd") + ":/etc/passwd:ro"}
	for _, p := range job.Paths {
		binds = append(binds, p+":"+p)
	}
	network := "none"
	if job.Network {
		network = "host"
	}
	env := []string{"LANG=C.UTF-8"}
	if tz := hostZone(); tz != "" {
		// initdb takes the host's zone as a seed's default, as on the host, instead
		// of matching every zone of the image against its own clock (seconds).
		env = append(env, "TZ="+tz)
	}
	code, err := d.runContainer(ctx, cmp.Or(job.Image, d.cfg.Image), []string{prog}, job.Args, env,
		binds, network, job.Stdin, job.Stdout, cmp.Or[io.Writer](job.Stderr, job.Stdout))
	if err != nil {
		return fmt.Errorf("%s: %w", job.Prog, err)
	}
	if code != 0 {
		return fmt.Errorf("%s: exit status %d", job.Prog, code)
	}
	return nil
}

// runContainer runs one container to completion, feeding it stdin and copying its
// output, and returns its exit code.
func (d *Docker) runContainer(ctx context.Context, image string, entrypoint, args, env, binds []string, network string,
	stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = stdout
	}
	cfg := &container.Config{
		Image: image, User: fmt.Sprintf("%d:%d", d.cfg.User.UID, d.cfg.User.GID),
		Entrypoint: entrypoint, Cmd: args, Env: env,
		Labels:       map[string]string{LabelInstance: d.cfg.Instance, LabelName: "job-" + filepath.Base(entrypoint[0])},
		AttachStdout: true, AttachStderr: true,
		AttachStdin: stdin != nil, OpenStdin: stdin != nil, StdinOnce: stdin != nil,
	}
	host := &container.HostConfig{NetworkMode: container.NetworkMode(network), Binds: binds, LogConfig: engineLogConfig}
	id, err := d.create(ctx, cfg, host, "pgbranch-job")
	if err != nil {
		return 0, err
	}
	defer d.remove(id)
	att, err := d.cli.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdin: stdin != nil, Stdout: true, Stderr: true})
	if err != nil {
		return 0, fmt.Errorf("attach to container: %w", err)
	}
	defer att.Close()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = stdcopy.StdCopy(stdout, stderr, att.Reader)
	}()
	if err := d.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return 0, fmt.Errorf("start container: %w", err)
	}
	if stdin != nil {
		go func() {
			_, _ = io.Copy(att.Conn, stdin)
			_ = att.CloseWrite()
		}()
	}
	waitC, errC := d.cli.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case res := <-waitC:
		select {
		case <-copied:
		case <-time.After(5 * time.Second):
		}
		if res.Error != nil {
			return 0, fmt.Errorf("container: %s", res.Error.Message)
		}
		return int(res.StatusCode), nil
	case err := <-errC:
		return 0, fmt.Errorf("wait for container: %w", err)
	}
}

// preload returns env with LD_PRELOAD kept only if the image's libc can load the
// library it names, and the bind mounts that make the library visible in the
// container. An image that cannot load it (musl, a libc too old) runs eager.
func (d *Docker) preload(ctx context.Context, image, version string, env []string) ([]string, []string) {
	var shim string
	var out []string
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "LD_PRELOAD="); ok && v != "" {
			shim = v
			continue
		}
		out = append(out, e)
	}
	if shim == "" {
		return out, nil
	}
	bind := shim + ":" + shim + ":ro"
	key := image + "\x00" + shim
	d.mu.Lock()
	ok, known := d.shimOK[key]
	d.mu.Unlock()
	if !known {
		var buf bytes.Buffer
		code, err := d.runContainer(ctx, image, []string{binDir(version) + "/postgres"}, []string{"-V"},
			[]string{"LD_PRELOAD=" + shim}, []string{bind}, "none", nil, &buf, &buf)
		if err != nil {
			return out, nil // not known either way: try again next time
		}
		ok = code == 0 && !strings.Contains(buf.String(), "cannot be preloaded") && strings.Contains(buf.String(), "PostgreSQL")
		if !ok {
			d.log.Warn("the image cannot load the lazyrw shim; its servers run eager (reads copy files up)",
				zap.String("image", image), zap.String("output", strings.TrimSpace(buf.String())))
		}
		d.mu.Lock()
		d.shimOK[key] = ok
		d.mu.Unlock()
	}
	if !ok {
		return out, nil
	}
	return append(out, "LD_PRELOAD="+shim), []string{bind}
}

// StopStrays stops and removes every container labelled with this runtime's
// instance: servers and jobs a previous run of the state directory left behind.
// Servers get a fast shutdown first (SIGINT, sent as a kill: an Engine older than
// API 1.42 ignores a stop's signal and would send SIGTERM, a smart shutdown that
// waits for clients), all at once, and SIGKILL after timeout.
func (d *Docker) StopStrays(ctx context.Context, timeout time.Duration) (int, error) {
	list, err := d.cli.ContainerList(ctx, container.ListOptions{
		All: true, Filters: filters.NewArgs(filters.Arg("label", LabelInstance+"="+d.cfg.Instance)),
	})
	if err != nil {
		return 0, fmt.Errorf("list containers: %w", err)
	}
	var wg sync.WaitGroup
	for _, c := range list {
		d.log.Warn("removing container left by a previous run", zap.String("container", shortID(c.ID)),
			zap.String("name", c.Labels[LabelName]), zap.String("state", c.State))
		wg.Go(func() {
			if c.State == "running" {
				d.stopStray(ctx, c.ID, timeout)
			}
			if path := c.Labels[LabelLog]; path != "" {
				d.saveStrayLog(ctx, c.ID, path)
			}
			d.remove(c.ID)
		})
	}
	wg.Wait()
	return len(list), nil
}

// saveStrayLog appends to a left-behind server's log file what its container wrote
// after the run that started it stopped copying its output there (a kill -9 of
// serve): the server's last lines before a crash, or its shutdown. The Engine keeps
// the container's output; the file has it up to its last change.
func (d *Docker) saveStrayLog(ctx context.Context, id, path string) {
	st, err := os.Stat(path)
	if err != nil {
		return // the branch is gone, or the server never started
	}
	// A second back: the Engine stamps a line when the server writes it, a little
	// before serve copies it, and a line it stamped just before serve died may not
	// have been copied. Lines of that second may come twice; none is lost.
	since := st.ModTime().Add(-time.Second)
	rc, err := d.cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true,
		Since: fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond())})
	if err != nil {
		d.log.Debug("read a left-behind container's log", zap.String("container", shortID(id)), zap.Error(err))
		return // a log driver the Engine cannot read back
	}
	defer rc.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		d.log.Warn("keep a left-behind container's log", zap.String("container", shortID(id)), zap.Error(err))
		return
	}
	defer f.Close()
	w := &headed{w: f, head: fmt.Sprintf("pgbranchproxy: what the server wrote after its proxy stopped following it, from the Docker Engine's log since %s:\n",
		since.UTC().Format(time.RFC3339Nano))}
	if _, err := stdcopy.StdCopy(w, w, rc); err != nil {
		d.log.Warn("keep a left-behind container's log", zap.String("container", shortID(id)), zap.Error(err))
	}
}

// headed writes head before the first bytes written to it, if any.
type headed struct {
	w    io.Writer
	head string
}

func (h *headed) Write(p []byte) (int, error) {
	if h.head != "" && len(p) > 0 {
		if _, err := io.WriteString(h.w, h.head); err != nil {
			return 0, err
		}
		h.head = ""
	}
	return h.w.Write(p)
}

// stopStray shuts a left-behind container's server down fast, or kills it after
// timeout.
func (d *Docker) stopStray(ctx context.Context, id string, timeout time.Duration) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	waitC, errC := d.cli.ContainerWait(wctx, id, container.WaitConditionNotRunning)
	if err := d.cli.ContainerKill(ctx, id, "SIGINT"); err != nil {
		d.log.Warn("stop container", zap.String("container", shortID(id)), zap.Error(err))
		return
	}
	select {
	case <-waitC:
		return
	case <-errC:
	}
	if err := d.cli.ContainerKill(ctx, id, "SIGKILL"); err != nil {
		d.log.Warn("kill container", zap.String("container", shortID(id)), zap.Error(err))
	}
}

// hostZone is this host's time zone name ($TZ, else where /etc/localtime points
// under a zoneinfo directory), or "".
func hostZone() string {
	if tz := os.Getenv("TZ"); tz != "" {
		return strings.TrimPrefix(tz, ":")
	}
	target, err := os.Readlink("/etc/localtime")
	if err != nil {
		return ""
	}
	if _, zone, ok := strings.Cut(target, "zoneinfo/"); ok {
		return zone
	}
	return ""
}

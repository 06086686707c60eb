package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	docker "github.com/docker/docker/client"
	"github.com/jackc/pgx/v5"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"go.uber.org/zap"
)

// conformer is what every runtime implements: servers and programs.
type conformer interface {
	runtime.Runtime
	runtime.Runner
}

// runtimes returns every runtime the conformance tests run against, by name.
func runtimes(t *testing.T, dir string) map[string]conformer {
	t.Helper()
	p, _ := newProcess(t)
	cli, err := docker.NewClientWithOpts(docker.FromEnv, docker.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	instance := "conformance-" + filepath.Base(dir)
	d, err := runtime.NewDocker(context.Background(), runtime.DockerConfig{
		Client: cli, Image: "pgbranchproxy/postgres:15", Instance: instance, User: p.User(),
		WorkDir: filepath.Join(dir, "docker-work"),
	}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CheckImage(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		list, _ := cli.ContainerList(context.Background(), container.ListOptions{All: true,
			Filters: filters.NewArgs(filters.Arg("label", runtime.LabelInstance+"="+instance))})
		for _, c := range list {
			t.Errorf("container %s left behind", c.Names)
			cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
		}
	})
	return map[string]conformer{"process": p, "docker": d}
}

// TestConformance runs the same life of a server on every runtime: initdb as a job,
// start, a query over the unix socket, a clean stop; a server that cannot start; and
// a preload library that cannot be loaded (the server runs without it).
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and containers: skipped with -short")
	}
	_, dir := newProcess(t)
	for name, rt := range runtimes(t, dir) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			base := filepath.Join(dir, name)
			if err := os.Mkdir(base, 0o711); err != nil {
				t.Fatal(err)
			}
			data, sock := ownedDir(t, rt, filepath.Join(base, "data")), ownedDir(t, rt, filepath.Join(base, "run"))
			var out bytes.Buffer
			if err := rt.Run(ctx, runtime.Job{Version: "15", Prog: "initdb", Stdout: &out, Paths: []string{data},
				Args: []string{"-D", data, "-U", "postgres", "-A", "trust", "--no-sync"}}); err != nil {
				t.Fatalf("initdb: %v\n%s", err, out.String())
			}
			notALib := filepath.Join(base, "not-a-library.so")
			if err := os.WriteFile(notALib, []byte("text"), 0o644); err != nil {
				t.Fatal(err)
			}
			spec := runtime.Spec{Name: "conformance-" + name, Version: "15", DataDir: data, SocketDir: sock,
				LogFile:  filepath.Join(base, "server.log"),
				Settings: map[string]string{"fsync": "off", "shared_buffers": "16MB"},
				Env:      []string{"LD_PRELOAD=" + notALib}}
			inst, err := rt.Start(ctx, spec)
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if inst.PID() <= 0 || !runtime.Alive(inst.PID()) {
				t.Errorf("PID %d is not a live process", inst.PID())
			}
			c, err := pgx.Connect(ctx, "host="+sock+" user=postgres dbname=postgres")
			if err != nil {
				t.Fatalf("connect over %s: %v", inst.SocketPath(), err)
			}
			var one int
			if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
				t.Errorf("SELECT 1: %d %v", one, err)
			}
			c.Close(ctx)
			checkReload(ctx, t, inst, data, sock)
			if err := inst.Stop(ctx); err != nil {
				t.Errorf("Stop: %v", err)
			}
			if err := inst.Reload(); !errors.Is(err, runtime.ErrExited) {
				t.Errorf("Reload of a stopped server: %v, want ErrExited", err)
			}
			select {
			case <-inst.Done():
			default:
				t.Error("Done is open after Stop")
			}
			// Discard: an immediate shutdown, with a session still open.
			if inst, err = rt.Start(ctx, spec); err != nil {
				t.Fatalf("Start again: %v", err)
			}
			if c, err = pgx.Connect(ctx, "host="+sock+" user=postgres dbname=postgres"); err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer c.Close(context.Background())
			if err := inst.Discard(ctx); err != nil {
				t.Errorf("Discard: %v", err)
			}
			select {
			case <-inst.Done():
			default:
				t.Error("Done is open after Discard")
			}
			if log, _ := os.ReadFile(spec.LogFile); !bytes.Contains(log, []byte("immediate shutdown request")) {
				t.Errorf("the server log shows no immediate shutdown:\n%s", log)
			}
			spec.Settings = map[string]string{"no_such_setting": "1"}
			if _, err := rt.Start(ctx, spec); !errors.Is(err, runtime.ErrExited) {
				t.Errorf("Start with a bad setting: %v, want ErrExited", err)
			}
		})
	}
}

// checkReload changes a setting in the server's postgresql.auto.conf and checks
// that Reload makes the server read it.
func checkReload(ctx context.Context, t *testing.T, inst runtime.Instance, data, sock string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(data, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("work_mem = '7MB'\n")
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		c, err := pgx.Connect(ctx, "host="+sock+" user=postgres dbname=postgres")
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		err = c.QueryRow(ctx, "SHOW work_mem").Scan(&got)
		c.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got == "7MB" {
			return
		}
	}
	t.Errorf("work_mem after Reload: %s, want 7MB", got)
}

func ownedDir(t *testing.T, rt conformer, path string) string {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, rt.User().UID, rt.User().GID); err != nil {
		t.Fatal(err)
	}
	return path
}

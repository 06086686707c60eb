package branches

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
)

func TestCheckLimits(t *testing.T) {
	m := newUnitManager(t, "")
	small := newUnitManager(t, "")
	small.cfg.Settings = map[string]string{"shared_buffers": "2048", "maintenance_work_mem": "16MB"} // 16MB of 8kB blocks
	for _, tc := range []struct {
		m      *Manager
		memory int64
		cpus   float64
		pids   int64
		ok     bool
	}{
		{m, 0, 0, 0, true},
		{m, 300 << 20, 0.5, 100, true},
		{m, 192 << 20, 1, 0, true},
		{m, 1024, 0, 0, false},
		{m, 100, 0, 0, false},
		{m, 0, 0.001, 0, false},
		{m, -1, 0, 0, false},
		{m, 0, 0, -5, false},
		// Below what a server needs: its shared_buffers and maintenance_work_mem
		// (Postgres's 128MB and 64MB, unless --pg-setting says otherwise), 8 processes.
		{m, 100 << 20, 0, 0, false},
		{m, 191 << 20, 0, 0, false},
		{small, 32 << 20, 0, 0, true},
		{small, 31 << 20, 0, 0, false},
		{m, 0, 0, 7, false},
		{m, 0, 0, 8, true},
	} {
		err := tc.m.checkLimits(tc.memory, tc.cpus, tc.pids)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("checkLimits(%d, %g, %d) with %v = %v, want ok %v", tc.memory, tc.cpus, tc.pids, tc.m.cfg.Settings, err, tc.ok)
		}
	}
}

// A branch set refused for its limits changes nothing else either.
func TestSetRefusedChangesNothing(t *testing.T) {
	t.Parallel()
	m := newUnitManager(t, "")
	b := addStopped(t, m, "b", time.Now().UTC())
	ttl, small := TTL(time.Hour), int64(1024)
	s := Settings{TTL: &ttl, ServerLimits: ServerLimits{MemoryBytes: &small}}
	if err := m.Set(context.Background(), "s", "b", s); !errors.Is(err, ErrInvalid) {
		t.Fatalf("set with a 1KB memory limit: %v, want ErrInvalid", err)
	}
	if b.rec.TTL != 0 {
		t.Errorf("the refused set saved its TTL: %s", b.rec.TTL)
	}
}

// cpuRuntime is a container runtime on an Engine whose host has two CPUs.
type cpuRuntime struct{ imageRuntime }

func (cpuRuntime) CheckLimits(_ context.Context, l runtime.Limits) error {
	if l.CPUs > 2 {
		return errors.New("the Docker Engine's host has 2")
	}
	return nil
}

// branch set refuses more CPUs than the Engine's host has, as a limit no server
// could start with, rather than record it for every later start to fail.
func TestSetCPUsBeyondEngine(t *testing.T) {
	t.Parallel()
	m := newUnitManager(t, "")
	m.cfg.Runtime = cpuRuntime{}
	addStopped(t, m, "b", time.Now().UTC())
	for cpus, ok := range map[float64]bool{1.5: true, 4: false} {
		err := m.Set(context.Background(), "s", "b", Settings{ServerLimits: ServerLimits{CPUs: &cpus}})
		if (err == nil) != ok || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("set %g cpus on a 2-CPU Engine: %v, want ok %v", cpus, err, ok)
		}
	}
}

// imageRuntime is a container runtime as listings see it: its default image and limits.
type imageRuntime struct {
	runtime.Runtime
	limits runtime.Limits
}

func (imageRuntime) CheckImage(context.Context, string) error { return nil }
func (imageRuntime) DefaultImage() string                     { return "serve:15" }
func (r imageRuntime) DefaultLimits() runtime.Limits          { return r.limits }

// Listings show, under a container runtime, the image and limits each server
// starts with: a branch's own limit, else its source's, else serve's; under
// another runtime, none.
func TestListServerViews(t *testing.T) {
	t.Parallel()
	m := newUnitManager(t, "")
	ctx := context.Background()
	m.sources["s"] = &sourceState{src: catalog.Source{Name: "s", Kind: "empty", Warm: -1}}
	t0 := time.Now().UTC()
	own := addStopped(t, m, "own", t0)
	addStopped(t, m, "inherits", t0)
	if err := m.cat.SetServerSettings(ctx, "s", "", time.Time{}, catalog.ServerSettings{Image: "pg:16", MemoryBytes: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	if err := m.cat.SetServerSettings(ctx, "s", "own", own.rec.CreatedAt, catalog.ServerSettings{MemoryBytes: 256 << 20, PIDs: 50}); err != nil {
		t.Fatal(err)
	}
	view := func() map[string]ServerView {
		got := map[string]ServerView{}
		for _, b := range m.List() {
			got[b.Name] = b.ServerView
		}
		for _, s := range m.Sources() {
			got["source "+s.Name] = s.ServerView
		}
		return got
	}
	if got := view(); got["own"] != (ServerView{}) || got["source s"] != (ServerView{}) {
		t.Errorf("process runtime: %+v, want no image or limits", got)
	}
	if js, _ := json.Marshal(m.List()); strings.Contains(string(js), "image") || strings.Contains(string(js), "memory_bytes") {
		t.Errorf("JSON under the process runtime: %s", js)
	}

	m.cfg.Runtime = imageRuntime{limits: runtime.Limits{CPUs: 2, PIDs: 500}}
	want := map[string]ServerView{
		"own":      {Image: "pg:16", MemoryBytes: 256 << 20, CPUs: 2, PIDs: 50},
		"inherits": {Image: "pg:16", MemoryBytes: 1 << 30, CPUs: 2, PIDs: 500},
		"source s": {Image: "pg:16", MemoryBytes: 1 << 30, CPUs: 2, PIDs: 500},
	}
	if got := view(); !maps.Equal(got, want) {
		t.Errorf("docker runtime:\n got %+v\nwant %+v", got, want)
	}
	// The admin API's JSON (branch ls --json) has them as fields of the branch.
	for _, b := range m.List() {
		if b.Name != "own" {
			continue
		}
		js, _ := json.Marshal(b)
		if !strings.Contains(string(js), `"image":"pg:16","memory_bytes":268435456,"cpus":2,"pids":50}`) {
			t.Errorf("JSON of a branch: %s", js)
		}
	}
	// A source recorded with no image (added under another runtime) runs serve's.
	if err := m.cat.SetServerSettings(ctx, "s", "", time.Time{}, catalog.ServerSettings{}); err != nil {
		t.Fatal(err)
	}
	if got := view()["inherits"]; got != (ServerView{Image: "serve:15", CPUs: 2, PIDs: 500}) {
		t.Errorf("source with no settings: %+v", got)
	}
}

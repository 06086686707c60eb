package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/internal/testbuild"
)

// TestSmoke runs all five workflows, scaled down to a few steps each (mcts to a
// chain 10 deep, past the depth where forks flatten), against a real proxy, and
// checks that every step completed and the report and JSON were written.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root, Postgres and OverlayFS")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root (OverlayFS mounts, Postgres as another user); run with -short to skip")
	}
	bin := t.TempDir()
	os.Chmod(bin, 0o755)
	if _, err := testbuild.Binary(bin, false); err != nil {
		t.Fatal(err)
	}
	if _, err := testbuild.Shim(bin); err != nil {
		t.Fatal(err)
	}
	tiny := map[string][2]int{"simulation": {2, 1}, "data_cleaning": {1, 2}, "software_dev": {1, 2}, "mcts": {1, 10}, "failure_repro": {1, 2}}
	var ws []workflow
	for _, w := range workflows {
		w.T, w.S = tiny[w.Name][0], tiny[w.Name][1]
		if w.Name == "mcts" {
			w.Gamma = 0 // one unbroken chain, 10 deep
		}
		ws = append(ws, w)
	}
	var progress bytes.Buffer
	cfg := config{workflows: ws, scale: seedScale{Warehouses: 1, Districts: 2, Customers: 20, Orders: 20, Items: 100, Suppliers: 10, NewOrdersFraction: 0.3},
		concurrency: 4, maxRunning: 4, idleStop: 2 * time.Second, sampleEvery: time.Second, binDir: bin,
		jsonPath: filepath.Join(t.TempDir(), "out.json"), progress: &progress}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	report := out.String()
	for _, w := range ws {
		if !strings.Contains(report, "| "+w.Name+" (") {
			t.Errorf("no row for %s:\n%s", w.Name, report)
		}
	}
	if !strings.Contains(report, "every step completes within 30 minutes: 18/18") {
		t.Errorf("not every step completed:\n%s\n%s", report, progress.String())
	}
	if !strings.Contains(report, "mcts: max depth 10") {
		t.Errorf("mcts did not reach depth 10:\n%s", report)
	}
	b, err := os.ReadFile(cfg.jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var ms []metric
	if err := json.Unmarshal(b, &ms); err != nil || len(ms) == 0 {
		t.Fatalf("BENCH_JSON: %v\n%s", err, b)
	}
	t.Logf("\n%s", report)
}

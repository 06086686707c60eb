package runtime_test

import (
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
)

// A server needs its shared_buffers and maintenance_work_mem, read as Postgres
// reads them, from its settings or Postgres's defaults.
func TestMinMemory(t *testing.T) {
	for _, tc := range []struct {
		settings map[string]string
		want     int64
	}{
		{nil, 192 << 20},
		{map[string]string{"shared_buffers": "1GB"}, 1<<30 + 64<<20},
		{map[string]string{"shared_buffers": "16384"}, 192 << 20},                                  // 8kB blocks
		{map[string]string{"shared_buffers": "256 MB", "maintenance_work_mem": "1024"}, 257 << 20}, // kB
		{map[string]string{"shared_buffers": "0.5GB", "maintenance_work_mem": "8MB"}, 520 << 20},
		{map[string]string{"shared_buffers": "lots"}, 192 << 20}, // Postgres refuses it, and says why
		{map[string]string{"shared_buffers": "16mb"}, 192 << 20}, // units are case-sensitive
		// Names are not: Postgres takes -c SHARED_BUFFERS=16MB and -c maintenance-work-mem=16MB.
		{map[string]string{"SHARED_BUFFERS": "16MB", "maintenance-work-mem": "16MB"}, 32 << 20},
		{map[string]string{"Shared_Buffers": "1GB", "shared_buffers": "16MB"}, 80 << 20}, // the last -c wins
	} {
		if got, parts := runtime.MinMemory(tc.settings); got != tc.want || !strings.Contains(parts, "shared_buffers (") {
			t.Errorf("MinMemory(%v) = %d (%s), want %d", tc.settings, got, parts, tc.want)
		}
	}
}

func TestLimitsCheck(t *testing.T) {
	for _, tc := range []struct {
		l    runtime.Limits
		want string // "" for accepted
	}{
		{runtime.Limits{}, ""},
		{runtime.Limits{MemoryBytes: 192 << 20, CPUs: 0.5, PIDs: 8}, ""},
		{runtime.Limits{MemoryBytes: 100 << 20}, "needs at least 192MB, its shared_buffers (128MB) and maintenance_work_mem (64MB)"},
		{runtime.Limits{MemoryBytes: 1 << 20}, "at least 6MB"},
		{runtime.Limits{PIDs: 7}, "needs at least 8"},
		{runtime.Limits{PIDs: -1}, "negative process limit"},
		{runtime.Limits{CPUs: -1}, "negative number of cpus"},
		{runtime.Limits{CPUs: 0.001}, "at least 0.01"},
	} {
		err := tc.l.Check(nil)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.l, err, tc.want)
		}
	}
}

package main

import (
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
)

// serve refuses at start the limits no branch server could run under, naming the
// flag, and limits the process runtime would not apply; a server that would have
// started under them failed only at its first session (too few processes to fork
// it) or its first heavy statement (the kernel killed it).
func TestLimitFlagsCheckedAtStart(t *testing.T) {
	small := map[string]string{"shared_buffers": "16MB", "maintenance_work_mem": "16MB"}
	for _, tc := range []struct {
		kind     string
		limits   runtime.Limits
		settings map[string]string
		want     string // "" for accepted
	}{
		{"process", runtime.Limits{}, nil, ""},
		{"docker", runtime.Limits{}, nil, ""},
		{"docker", runtime.Limits{MemoryBytes: 512 << 20, CPUs: 1, PIDs: 200}, nil, ""},
		{"docker", runtime.Limits{PIDs: 4}, nil, "--branch-pids: a limit of 4 processes: a branch server needs at least 8"},
		{"docker", runtime.Limits{MemoryBytes: 100 << 20}, nil, "--branch-memory: a memory limit of 100MB: a branch server needs at least 192MB"},
		{"docker", runtime.Limits{MemoryBytes: 100 << 20}, small, ""},
		{"docker", runtime.Limits{CPUs: -1}, nil, "--branch-cpus: a negative number of cpus"},
		{"process", runtime.Limits{MemoryBytes: 1 << 30}, nil, "give them with --runtime docker"},
	} {
		err := checkLimitFlags(runtimeFlags{kind: tc.kind, limits: tc.limits}, tc.settings)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("--runtime %s %+v %v: %v, want %q", tc.kind, tc.limits, tc.settings, err, tc.want)
		}
	}
}

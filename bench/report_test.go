package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseTPS(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, out string
		want      float64
		wantErr   bool
	}{
		{"pg15", "number of failed transactions: 0 (0.000%)\nlatency average = 0.101 ms\ninitial connection time = 2.009 ms\ntps = 9876.543210 (without initial connection time)\n", 9876.54321, false},
		{"reconnect", "tps = 812.5 (including reconnection times)\n", 812.5, false},
		{"failures", "number of failed transactions: 3 (0.1%)\ntps = 100.0 (without initial connection time)\n", 0, true},
		{"no summary", "pgbench: error: connection to server failed\n", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseTPS(tc.out)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseTPS err = %v, wantErr %v", err, tc.wantErr)
			}
			if !tc.wantErr && math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("parseTPS = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWorkloadArgs(t *testing.T) {
	t.Parallel()
	got := strings.Join(workload{Conn: "dbname=x", Clients: 8, Seconds: 10, SelectOnly: true, ConnectPerTxn: true}.args(2), " ")
	if want := "-n -c 8 -j 2 -T 10 -S -C dbname=x"; got != want {
		t.Errorf("args = %q, want %q", got, want)
	}
}

func TestReportJSONAndMarkdown(t *testing.T) {
	t.Parallel()
	rep := &report{}
	rep.series("select_only_c1_tps/proxy", "tps", []float64{1000, 1200, 1100}, "pgbench -S")
	rep.series("select_only_c1_ratio/proxy_vs_pgbouncer", "ratio", pairedRatios([]float64{1000, 1200, 1100}, []float64{1000, 1000, 1000}), "paired")
	rep.latency("new_branch_first_query_ms", "small", []float64{80, 90, 100, 110, 400}, false, "")
	rep.series("template_clone_ms/p50/large", "ms", nil, "not run") // no samples: NaN, left out of JSON
	addTargets(rep)

	path := filepath.Join(t.TempDir(), "bench.json")
	if err := writeJSON(path, rep.metrics()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	byName := map[string]map[string]any{}
	for _, m := range got {
		for _, k := range []string{"name", "value", "unit"} {
			if _, ok := m[k]; !ok {
				t.Errorf("entry %v has no %q", m, k)
			}
		}
		byName[m["name"].(string)] = m
	}
	if len(got) != 4 {
		t.Errorf("got %d entries, want 4 (the NaN row left out): %s", len(got), b)
	}
	if v := byName["select_only_c1_tps/proxy"]["value"]; v != 1100.0 {
		t.Errorf("proxy tps = %v, want the median 1100", v)
	}
	if r := byName["select_only_c1_tps/proxy"]["range"]; r != "1000–1200" {
		t.Errorf("range = %v", r)
	}
	if v := byName["new_branch_first_query_ms/p50/small"]["value"]; v != 100.0 {
		t.Errorf("p50 = %v, want 100", v)
	}
	if u := byName["select_only_c1_ratio/proxy_vs_pgbouncer"]["unit"]; u != "ratio" {
		t.Errorf("ratio unit = %v", u)
	}

	var md strings.Builder
	rep.markdown(&md)
	for _, want := range []string{
		"| `select_only_c1_tps/proxy` | 1100 | tps | 1000–1200 | 3 |",
		"| proxy ≥ PgBouncer, select-only c1 (paired ratio ≥ 1) | select_only_c1_ratio/proxy_vs_pgbouncer = 1.100 | **met** |",
		"| new-branch first query p50 < 150 ms (small) | new_branch_first_query_ms/p50/small = 100.0 | **met** |",
		"select_only_c8_ratio/proxy_vs_pgbouncer not measured | not measured |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}

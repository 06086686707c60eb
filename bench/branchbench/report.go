package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// hosted are the completion counts BranchBench's authors published for hosted
// systems (a 2-hour cap per workflow); theirs, not measured here.
var hosted = map[string]string{
	"mcts": "Dolt 170/1000, Neon 33/1000 (at most 20 live branches)",
}

// percentile returns the p-th percentile of xs by linear interpolation between the
// closest ranks, or NaN for no values. xs is not modified.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := p / 100 * float64(len(s)-1)
	lo, hi := int(math.Floor(pos)), int(math.Ceil(pos))
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// pooled is every sample of m, whatever the depth.
func pooled(m map[int][]float64) []float64 {
	var out []float64
	for _, xs := range m {
		out = append(out, xs...)
	}
	return out
}

// cell formats p50/p99 (n) of xs, or a dash for no samples.
func cell(xs []float64) string {
	if len(xs) == 0 {
		return "–"
	}
	return fmt.Sprintf("%s / %s (%d)", num(percentile(xs, 50)), num(percentile(xs, 99)), len(xs))
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// share is branch management's share of the workers' step time, in percent.
func (r *result) share() float64 {
	if r.StepMS == 0 {
		return math.NaN()
	}
	return 100 * r.ManageMS / r.StepMS
}

// ratio is the p50 of a over the p50 of b.
func ratio(a, b []float64) float64 { return percentile(a, 50) / percentile(b, 50) }

// writeRows prints one table row per result.
func writeRows(out io.Writer, results []*result) {
	for _, r := range results {
		d := r.MaxDepth
		theirs := hosted[r.W.Name]
		if theirs == "" {
			theirs = "none completed all five in 2 h"
		}
		fmt.Fprintf(out, "| %s (T=%d S=%d F_r=%d F_i=%d D=%d C=%d γ=%.1f M_s=%d M_d=%d Q_v=%d) | %d/%d | %.1f s | %s | d%d: %s | %s | %s | %s | %s | %.0f%% | %d | %d | %s | %s | %s |\n",
			r.W.Name, r.W.T, r.W.S, r.W.Fr, r.W.Fi, r.W.D, r.W.C, r.W.Gamma, r.W.Ms, r.W.Md, r.W.Qv,
			r.Completed, r.W.steps(), r.Wall.Seconds(), cell(r.Fork[1]), d, cell(r.Fork[d]), cell(r.Eval[1]), cell(r.Eval[d]),
			cell(r.Destroy[1]), cell(r.Destroy[d]), r.share(), r.PeakLive, r.PeakRun, mib(r.PeakOwned), mib(r.PeakDisk), theirs)
	}
}

// writeTable prints the results table, the targets and the machine line.
func writeTable(out io.Writer, machine string, results []*result, total time.Duration) {
	fmt.Fprintf(out, "%s\n\n", machine)
	fmt.Fprintln(out, "| workflow | steps | wall | fork d1 | fork deepest | eval d1 | eval deepest | destroy d1 | destroy deepest | management | peak live | peak servers | peak owned | peak disk | hosted systems (theirs) |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	writeRows(out, results)
	fmt.Fprintln(out)
	for _, r := range results {
		cross := []string{"none"}
		if len(r.Cross) > 0 {
			cross = nil
		}
		for _, c := range r.Cross {
			cross = append(cross, fmt.Sprintf("%d branches in %.1f s (%d failed)", c.Branches, c.Took.Seconds(), c.Failed))
		}
		fmt.Fprintf(out, "- %s: max depth %d; %d forks fell back to the root after the tree filled; %d live at the end; cold creates %s ms; cross-branch queries: %s; %d failed steps%s\n",
			r.W.Name, r.MaxDepth, r.Overflow, r.LiveAtEnd, cell(r.Cold), strings.Join(cross, ", "), r.Failed, errNote(r.Errors))
	}
	fmt.Fprintln(out)
	for _, t := range targets(results, total) {
		mark := "met"
		if !t.met {
			mark = "NOT met"
		}
		fmt.Fprintf(out, "- %s: %s (%s)\n", t.text, t.value, mark)
	}
}

func errNote(errs []string) string {
	if len(errs) == 0 {
		return ""
	}
	return " (first: " + errs[0] + ")"
}

// target is one of the targets and whether this run met it.
type target struct {
	text, value string
	met         bool
}

// targets checks the run against the targets.
func targets(results []*result, total time.Duration) []target {
	done, all := 0, 0
	var forks, cold []float64
	evalOK, evalText := true, []string{}
	var out []target
	for _, r := range results {
		done += r.Completed
		all += r.W.steps()
		forks = append(forks, pooled(r.Fork)...)
		cold = append(cold, r.Cold...)
		if r.MaxDepth > 1 {
			q := ratio(r.Eval[r.MaxDepth], r.Eval[1])
			evalOK = evalOK && q <= 1.2
			evalText = append(evalText, fmt.Sprintf("%s %.2fx (d%d)", r.W.Name, q, r.MaxDepth))
		}
		if r.W.Name == "mcts" {
			d := min(25, r.MaxDepth)
			q := ratio(r.Fork[d], r.Fork[1])
			out = append(out, target{fmt.Sprintf("mcts fork p50 at depth %d ≤ 1.5× depth 1", d), fmt.Sprintf("%.2fx", q), q <= 1.5 && d == 25})
		}
	}
	out = append([]target{{"every step completes within 30 minutes", fmt.Sprintf("%d/%d in %.1f min", done, all, total.Minutes()),
		done == all && total <= 30*time.Minute}}, out...)
	out = append(out, target{"eval p50 at the deepest depth ≤ 1.2× depth 1", strings.Join(evalText, ", "), evalOK})
	q := ratio(forks, cold)
	out = append(out, target{"fork p50 ≤ 2× a new branch's cold create", fmt.Sprintf("%.2fx (%s vs %s ms)", q, num(percentile(forks, 50)), num(percentile(cold, 50))), q <= 2})
	return out
}

// metric is one JSON entry: name, value and unit (the shape the main benchmark
// writes), plus free text.
type metric struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Extra string  `json:"extra,omitempty"`
}

// metrics flattens the results for BENCH_JSON. NaN values are left out.
func metrics(machine string, results []*result, total time.Duration) []metric {
	var out []metric
	add := func(name string, v float64, unit, extra string) {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out = append(out, metric{"branchbench/" + name, v, unit, extra})
		}
	}
	for _, r := range results {
		w := r.W.Name
		add(w+"/completed", float64(r.Completed), "steps", fmt.Sprintf("of %d; %s", r.W.steps(), machine))
		add(w+"/wall", r.Wall.Seconds(), "s", "")
		add(w+"/management_share", r.share(), "%", "fork and destroy time over the workers' step time")
		add(w+"/peak_live", float64(r.PeakLive), "branches", "")
		add(w+"/peak_running", float64(r.PeakRun), "servers", "")
		add(w+"/peak_owned", float64(r.PeakOwned)/(1<<20), "MiB", "")
		add(w+"/peak_disk", float64(r.PeakDisk)/(1<<20), "MiB", "state directory without the seeds")
		add(w+"/max_depth", float64(r.MaxDepth), "depth", "")
		add(w+"/cold_create/p50", percentile(r.Cold, 50), "ms", fmt.Sprintf("n=%d", len(r.Cold)))
		for _, op := range []struct {
			name string
			m    map[int][]float64
		}{{"fork", r.Fork}, {"eval", r.Eval}, {"destroy", r.Destroy}} {
			for _, d := range []int{1, r.MaxDepth} {
				xs := op.m[d]
				add(fmt.Sprintf("%s/%s/p50/d%d", w, op.name, d), percentile(xs, 50), "ms", fmt.Sprintf("n=%d", len(xs)))
				add(fmt.Sprintf("%s/%s/p99/d%d", w, op.name, d), percentile(xs, 99), "ms", fmt.Sprintf("n=%d", len(xs)))
				if d == r.MaxDepth {
					break
				}
			}
		}
	}
	for _, t := range targets(results, total) {
		met := 0.0
		if t.met {
			met = 1
		}
		add("target/"+t.text, met, "met", t.value)
	}
	add("total", total.Minutes(), "min", machine)
	return out
}

// writeJSON writes the metrics to path.
func writeJSON(path string, ms []metric) error {
	b, err := json.MarshalIndent(ms, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

package main

import (
	"fmt"
	"time"
)

// Growth that does not level off, precisely: over the samples taken under load
// (including the one when the load ends), M is the mean of those in the middle third
// of the run and L the mean of those in the last third. A measure fails when L - M
// exceeds its allowance: the larger of an absolute amount and a fraction of M. Warm-up
// (branches created in the first third) is thus not counted, and a leak of a few
// objects a minute over a 10-minute run is. Open fds, goroutines and RSS are judged
// for each process the soak started; mounts, postmasters and branch rows over the
// whole system. The catalog may grow by the transitions log (history, kept by design)
// at up to 1 KiB a row, plus 4 MiB (one SQLite WAL's worth, or the dead row versions
// a Postgres catalog keeps until autovacuum); its growth beyond that fails.
type allowance struct {
	name string
	abs  float64
	rel  float64
	get  func(sample) float64
}

// procAllowances apply to each process; get reads process i of a sample.
var procAllowances = []struct {
	name string
	abs  float64
	rel  float64
	get  func(procSample) float64
}{
	{"open fds", 32, 0.25, func(s procSample) float64 { return float64(s.fds) }},
	{"goroutines", 64, 0.25, func(s procSample) float64 { return float64(s.goroutines) }},
	{"RSS bytes", 32 << 20, 0.25, func(s procSample) float64 { return float64(s.rss) }},
}

var allowances = []allowance{
	{"mounts", 10, 0.25, func(s sample) float64 { return float64(s.mounts) }},
	{"postmasters", 10, 0.25, func(s sample) float64 { return float64(s.postmasters) }},
	{"catalog rows", 10, 0.25, func(s sample) float64 { return float64(s.catalog.branches) }},
}

// judge applies the growth rule to the samples of a run of length d.
func (r *recorder) judge(d time.Duration) []string {
	var problems []string
	var mid, last []sample
	for _, s := range r.samples {
		if s.err != "" {
			problems = append(problems, fmt.Sprintf("sample at %s: %s", s.at, s.err))
		}
		if s.phase != "load" && s.phase != "end" {
			continue
		}
		switch {
		case s.at >= 2*d/3:
			last = append(last, s)
		case s.at >= d/3:
			mid = append(mid, s)
		}
	}
	if len(mid) == 0 || len(last) == 0 {
		return append(problems, fmt.Sprintf("too few samples to judge growth (%d in the middle third, %d in the last)", len(mid), len(last)))
	}
	all := allowances
	for i, p := range r.sys.procs {
		for _, a := range procAllowances {
			name := a.name
			if len(r.sys.procs) > 1 {
				name = p.name + " " + name
			}
			all = append(all, allowance{name, a.abs, a.rel, func(s sample) float64 { return a.get(s.procs[i]) }})
		}
	}
	for _, a := range all {
		m, l := mean(mid, a.get), mean(last, a.get)
		if limit := max(a.abs, a.rel*m); l-m > limit {
			problems = append(problems, fmt.Sprintf("%s grow without levelling off: mean %.0f in the middle third, %.0f in the last (allowed +%.0f)", a.name, m, l, limit))
		}
	}
	catM, catL := mean(mid, func(s sample) float64 { return float64(s.catalog.bytes) }), mean(last, func(s sample) float64 { return float64(s.catalog.bytes) })
	trM, trL := mean(mid, func(s sample) float64 { return float64(s.catalog.transitions) }), mean(last, func(s sample) float64 { return float64(s.catalog.transitions) })
	if limit := 4<<20 + 1024*(trL-trM); catL-catM > limit {
		problems = append(problems, fmt.Sprintf("catalog grows beyond its transitions log: %.0f KiB more in the last third than in the middle one, for %.0f more transitions (allowed %.0f KiB)",
			(catL-catM)/1024, trL-trM, limit/1024))
	}
	return problems
}

func mean(ss []sample, get func(sample) float64) float64 {
	var sum float64
	for _, s := range ss {
		sum += get(s)
	}
	return sum / float64(len(ss))
}

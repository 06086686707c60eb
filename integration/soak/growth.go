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
// objects a minute over a 10-minute run is. The catalog may grow by the transitions
// log (history, kept by design) at up to 1 KiB a row, plus one SQLite WAL's worth
// (4 MiB); its growth beyond that fails.
type allowance struct {
	name string
	abs  float64
	rel  float64
	get  func(sample) float64
}

var allowances = []allowance{
	{"open fds", 32, 0.25, func(s sample) float64 { return float64(s.fds) }},
	{"goroutines", 64, 0.25, func(s sample) float64 { return float64(s.goroutines) }},
	{"RSS bytes", 32 << 20, 0.25, func(s sample) float64 { return float64(s.rss) }},
	{"mounts", 10, 0.25, func(s sample) float64 { return float64(s.mounts) }},
	{"postmasters", 10, 0.25, func(s sample) float64 { return float64(s.postmasters) }},
	{"catalog rows", 10, 0.25, func(s sample) float64 { return float64(s.branchRows) }},
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
	for _, a := range allowances {
		m, l := mean(mid, a.get), mean(last, a.get)
		if limit := max(a.abs, a.rel*m); l-m > limit {
			problems = append(problems, fmt.Sprintf("%s grow without levelling off: mean %.0f in the middle third, %.0f in the last (allowed +%.0f)", a.name, m, l, limit))
		}
	}
	catM, catL := mean(mid, func(s sample) float64 { return float64(s.catalog) }), mean(last, func(s sample) float64 { return float64(s.catalog) })
	trM, trL := mean(mid, func(s sample) float64 { return float64(s.transitions) }), mean(last, func(s sample) float64 { return float64(s.transitions) })
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

package main

import (
	"math"
	"slices"
)

// median returns the median of xs (the mean of the two middle values for an even
// count), or NaN for no values. xs is not modified.
func median(xs []float64) float64 {
	return percentile(xs, 50)
}

// percentile returns the p-th percentile of xs (0 <= p <= 100) by linear
// interpolation between the closest ranks, or NaN for no values. xs is not modified.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if p <= 0 {
		return s[0]
	}
	if p >= 100 {
		return s[len(s)-1]
	}
	pos := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	frac := pos - float64(lo)
	return s[lo] + (s[hi]-s[lo])*frac
}

// minMax returns the smallest and largest of xs, or NaN, NaN for no values.
func minMax(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(xs), slices.Max(xs)
}

// pairedRatios returns a[i]/b[i] for every round i both measured, skipping rounds
// where b[i] is zero or either value is NaN. The slices are paired by index: a[i]
// and b[i] were measured in the same round.
func pairedRatios(a, b []float64) []float64 {
	n := min(len(a), len(b))
	out := make([]float64, 0, n)
	for i := range n {
		if b[i] == 0 || math.IsNaN(a[i]) || math.IsNaN(b[i]) {
			continue
		}
		out = append(out, a[i]/b[i])
	}
	return out
}

// rotation returns the order in which round r runs n configurations: round 0 runs
// 0 1 2 …, round 1 runs 1 2 … 0, and so on, so that every configuration takes
// every position equally often over n rounds and none always runs first (cold) or
// right after the same neighbour.
func rotation(n, r int) []int {
	out := make([]int, n)
	for i := range n {
		out[i] = (i + r) % n
	}
	return out
}

// summary is the median and range of one series of samples.
type summary struct {
	Median, Min, Max float64
	N                int
}

// summarize returns the median, min, max and count of xs.
func summarize(xs []float64) summary {
	lo, hi := minMax(xs)
	return summary{Median: median(xs), Min: lo, Max: hi, N: len(xs)}
}

package main

import (
	"math"
	"slices"
	"testing"
)

func TestPercentiles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		xs   []float64
		p    float64
		want float64
	}{
		{"median odd", []float64{5, 1, 3}, 50, 3},
		{"median even", []float64{4, 1, 3, 2}, 50, 2.5},
		{"single", []float64{7}, 95, 7},
		{"p0 is min", []float64{3, 1, 2}, 0, 1},
		{"p100 is max", []float64{3, 1, 2}, 100, 3},
		{"p95 interpolates", []float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 200}, 95, 190.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := slices.Clone(tc.xs)
			if got := percentile(tc.xs, tc.p); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("percentile(%v, %v) = %v, want %v", tc.xs, tc.p, got, tc.want)
			}
			if !slices.Equal(in, tc.xs) {
				t.Errorf("percentile reordered its input: %v", tc.xs)
			}
		})
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median(nil) is not NaN")
	}
}

func TestMinMaxAndSummary(t *testing.T) {
	t.Parallel()
	lo, hi := minMax([]float64{3, -1, 8, 2})
	if lo != -1 || hi != 8 {
		t.Errorf("minMax = %v, %v", lo, hi)
	}
	if lo, hi := minMax(nil); !math.IsNaN(lo) || !math.IsNaN(hi) {
		t.Errorf("minMax(nil) = %v, %v", lo, hi)
	}
	s := summarize([]float64{100, 300, 200})
	if s != (summary{Median: 200, Min: 100, Max: 300, N: 3}) {
		t.Errorf("summarize = %+v", s)
	}
}

func TestPairedRatios(t *testing.T) {
	t.Parallel()
	a := []float64{110, 90, 200, math.NaN(), 50}
	b := []float64{100, 100, 0, 10, 50, 999}
	got := pairedRatios(a, b)
	want := []float64{1.1, 0.9, 1} // round 3 (b=0) and round 4 (NaN) are skipped; b's extra round has no pair
	if len(got) != len(want) {
		t.Fatalf("pairedRatios = %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Fatalf("pairedRatios = %v, want %v", got, want)
		}
	}
	// Pairing matters: the median of per-round ratios is not the ratio of medians.
	a2, b2 := []float64{10, 20, 30}, []float64{20, 10, 30}
	if m := median(pairedRatios(a2, b2)); m != 1 {
		t.Errorf("median paired ratio = %v, want 1", m)
	}
}

func TestRotation(t *testing.T) {
	t.Parallel()
	want := [][]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 1, 2}}
	for r, w := range want {
		if got := rotation(3, r); !slices.Equal(got, w) {
			t.Errorf("rotation(3, %d) = %v, want %v", r, got, w)
		}
	}
	// Over n rounds every configuration takes every position exactly once.
	const n = 5
	for pos := range n {
		seen := map[int]bool{}
		for r := range n {
			seen[rotation(n, r)[pos]] = true
		}
		if len(seen) != n {
			t.Errorf("position %d sees %d configurations over %d rounds", pos, len(seen), n)
		}
	}
}

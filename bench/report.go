package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// row is one line of the results table and one entry of the JSON output. Min and
// Max are NaN when a range means nothing for the row (a single measurement).
type row struct {
	Name     string
	Unit     string
	Value    float64
	Min, Max float64
	N        int
	Note     string
}

// metric is one JSON entry, in the shape github-action-benchmark's custom tools
// read: name, value and unit, plus an optional range and free text.
type metric struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Range string  `json:"range,omitempty"`
	Extra string  `json:"extra,omitempty"`
}

// target is one line of the targets table: what the issue asked for and whether
// this run met it. Measured is false when the numbers it needs are missing.
type target struct {
	Text     string
	Value    string
	Met      bool
	Measured bool
}

// report collects rows and targets. The zero value is empty and ready to use; it
// is not safe for concurrent use.
type report struct {
	rows    []row
	targets []target
}

// add appends one row.
func (r *report) add(x row) { r.rows = append(r.rows, x) }

// series adds name as the median of xs, with its range.
func (r *report) series(name, unit string, xs []float64, note string) {
	s := summarize(xs)
	r.add(row{Name: name, Unit: unit, Value: s.Median, Min: s.Min, Max: s.Max, N: s.N, Note: note})
}

// latency adds base/p50 and base/p95 (and base/max when withMax), each followed
// by suffix when it is not empty (base/p50/small), with the range of all samples,
// in milliseconds.
func (r *report) latency(base, suffix string, xs []float64, withMax bool, note string) {
	r.percentiles(base, suffix, "ms", xs, withMax, note)
}

// percentiles is latency for samples in unit.
func (r *report) percentiles(base, suffix, unit string, xs []float64, withMax bool, note string) {
	lo, hi := minMax(xs)
	ps := []struct {
		name string
		v    float64
	}{{"p50", percentile(xs, 50)}, {"p95", percentile(xs, 95)}}
	if withMax {
		ps = append(ps, struct {
			name string
			v    float64
		}{"max", hi})
	}
	for _, p := range ps {
		name := base + "/" + p.name
		if suffix != "" {
			name += "/" + suffix
		}
		r.add(row{Name: name, Unit: unit, Value: p.v, Min: lo, Max: hi, N: len(xs), Note: note})
	}
}

// get returns the row called name.
func (r *report) get(name string) (row, bool) {
	for _, x := range r.rows {
		if x.Name == name {
			return x, true
		}
	}
	return row{}, false
}

// check adds a target that holds when ok(value of the row called name).
func (r *report) check(text, name string, ok func(float64) bool) {
	x, found := r.get(name)
	if !found || math.IsNaN(x.Value) {
		r.targets = append(r.targets, target{Text: text, Value: name + " not measured"})
		return
	}
	r.targets = append(r.targets, target{Text: text, Value: name + " = " + format(x.Value, x.Unit), Met: ok(x.Value), Measured: true})
}

// format renders v with the precision its unit deserves.
func format(v float64, unit string) string {
	if math.IsNaN(v) {
		return "-"
	}
	switch unit {
	case "tps":
		return fmt.Sprintf("%.0f", v)
	case "ratio":
		return fmt.Sprintf("%.3f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

func (x row) rangeText() string {
	if math.IsNaN(x.Min) || math.IsNaN(x.Max) || x.N < 2 {
		return ""
	}
	return format(x.Min, x.Unit) + "–" + format(x.Max, x.Unit)
}

// markdown writes the results and targets tables.
func (r *report) markdown(w io.Writer) {
	fmt.Fprintln(w, "| metric | value | unit | min–max | n | note |")
	fmt.Fprintln(w, "|---|---:|---|---|---:|---|")
	for _, x := range r.rows {
		fmt.Fprintf(w, "| `%s` | %s | %s | %s | %d | %s |\n", x.Name, format(x.Value, x.Unit), x.Unit, x.rangeText(), x.N, cell(x.Note))
	}
	if len(r.targets) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| target | measured | result |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, t := range r.targets {
		res := "not measured"
		if t.Measured && t.Met {
			res = "**met**"
		} else if t.Measured {
			res = "**missed**"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", cell(t.Text), cell(t.Value), res)
	}
}

func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// metrics converts the rows to JSON entries, leaving out rows without a value
// (JSON has no NaN).
func (r *report) metrics() []metric {
	out := make([]metric, 0, len(r.rows))
	for _, x := range r.rows {
		if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) {
			continue
		}
		m := metric{Name: x.Name, Value: math.Round(x.Value*1e4) / 1e4, Unit: x.Unit, Range: x.rangeText(), Extra: x.Note}
		if x.N > 0 {
			m.Extra = strings.TrimSpace(fmt.Sprintf("n=%d %s", x.N, x.Note))
		}
		out = append(out, m)
	}
	return out
}

// writeJSON writes ms to path as an indented JSON array.
func writeJSON(path string, ms []metric) error {
	b, err := json.MarshalIndent(ms, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// quotient adds name as the value of row num over the value of row den, when both
// were measured in this run.
func (r *report) quotient(name, num, den, note string) {
	a, okA := r.get(num)
	b, okB := r.get(den)
	if !okA || !okB || b.Value == 0 {
		return
	}
	r.add(row{Name: name, Unit: "ratio", Value: a.Value / b.Value, Min: math.NaN(), Max: math.NaN(), N: 1, Note: note})
}

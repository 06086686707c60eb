package main

import (
	"bytes"
	"crypto/sha256"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestSeedIsDeterministic(t *testing.T) {
	s := seedScale{Warehouses: 1, Districts: 2, Customers: 10, Orders: 10, Items: 50, Suppliers: 5, NewOrdersFraction: 0.3}
	var a, b bytes.Buffer
	if err := writeSeed(&a, s); err != nil {
		t.Fatal(err)
	}
	writeSeed(&b, s)
	if sha256.Sum256(a.Bytes()) != sha256.Sum256(b.Bytes()) {
		t.Fatal("two seeds of the same scale differ")
	}
	sql := a.String()
	for _, table := range []string{"warehouse", "district", "customer", "history", "item", "stock", "orders", "new_order", "order_line", "region", "nation", "supplier"} {
		if !strings.Contains(sql, "COPY "+table+" FROM stdin;\n") {
			t.Errorf("no COPY for %s", table)
		}
	}
	// 2 districts x 3 undelivered orders.
	block := sql[strings.Index(sql, "COPY new_order"):]
	block = block[:strings.Index(block, "\\.\n")]
	if n := strings.Count(block, "\n") - 1; n != 6 {
		t.Errorf("new_order has %d rows, want 6", n)
	}
}

func TestParentSelection(t *testing.T) {
	w := workflow{Name: "x", Fr: 2, Fi: 1, D: 2}
	tr := newTree(w, "root")
	rng := rand.New(rand.NewPCG(1, 1))
	p := tr.pick(nil, rng)
	if p != tr.root {
		t.Fatalf("first parent %q, want the root", p.name)
	}
	a := tr.add("a", p)
	tr.finish(a, false)
	// The current node has depth and fanout left: it is the parent.
	if p := tr.pick(a, rng); p != a {
		t.Fatalf("parent %q, want the current node a", p.name)
	}
	b := tr.add("b", a)
	tr.finish(b, false)
	// b is at the maximum depth and a is full: the root has room.
	if p := tr.pick(b, rng); p != tr.root {
		t.Fatalf("parent %q, want the root", p.name)
	}
	c := tr.add("c", tr.root)
	tr.finish(c, true) // pruned
	// Nothing has room (root full, a full, b at depth, c pruned): the root again.
	if p := tr.pick(c, rng); p != tr.root || tr.overflow != 1 {
		t.Fatalf("parent %q overflow %d, want the root and 1", p.name, tr.overflow)
	}
	if got := strings.Join(tr.liveNames(), ","); got != "root,a,b" {
		t.Errorf("live %s", got)
	}
	if tr.peakLive != 3 {
		t.Errorf("peak live %d, want 3", tr.peakLive)
	}
}

func TestPercentileAndTargets(t *testing.T) {
	if v := percentile([]float64{4, 1, 3, 2}, 50); v != 2.5 {
		t.Errorf("p50 %v", v)
	}
	if !math.IsNaN(percentile(nil, 50)) {
		t.Error("p50 of nothing is not NaN")
	}
	r := newResult(workflow{Name: "mcts", T: 1, S: 2, D: 25})
	r.Completed, r.MaxDepth = 2, 25
	r.Fork[1], r.Fork[25] = []float64{100}, []float64{140}
	r.Eval[1], r.Eval[25] = []float64{10}, []float64{13}
	r.Cold = []float64{80}
	got := map[string]bool{}
	for _, tg := range targets([]*result{r}, 0) {
		got[tg.text] = tg.met
	}
	want := map[string]bool{"every step completes within 30 minutes": true, "mcts fork p50 at depth 25 ≤ 1.5× depth 1": true,
		"eval p50 at the deepest depth ≤ 1.2× depth 1": false, "fork p50 ≤ 2× a new branch's cold create": true}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: met=%v, want %v", k, got[k], v)
		}
	}
}

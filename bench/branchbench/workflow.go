package main

import (
	"math/rand/v2"
	"sync"
)

// workflow is one BranchBench parameter tuple, in the paper's notation.
type workflow struct {
	Name  string
	Short string  // branch name prefix
	T     int     // workers
	S     int     // steps per worker
	Fr    int     // root fanout
	Fi    int     // inner fanout
	D     int     // max depth
	C     int     // cross-branch queries in the run
	Gamma float64 // prune probability
	Ms    int     // schema changes per step
	Md    int     // data mutations per step
	Qv    int     // eval queries per step
	Shape string  // what the tree looks like
}

// steps is T×S, the worker-steps of the run.
func (w workflow) steps() int { return w.T * w.S }

// workflows are the five macrobenchmark tuples of BranchBench (arXiv:2604.17180).
var workflows = []workflow{
	{Name: "simulation", Short: "sim", T: 1000, S: 1, Fr: 1000, Fi: 0, D: 1, C: 1, Gamma: 1.0, Ms: 0, Md: 50, Qv: 1, Shape: "flat star"},
	{Name: "data_cleaning", Short: "dc", T: 10, S: 20, Fr: 10, Fi: 3, D: 3, C: 2, Gamma: 0.0, Ms: 1, Md: 1, Qv: 1, Shape: "wide shallow"},
	{Name: "software_dev", Short: "sd", T: 5, S: 20, Fr: 5, Fi: 3, D: 4, C: 1, Gamma: 0.1, Ms: 1, Md: 1, Qv: 2, Shape: "bushy"},
	{Name: "mcts", Short: "mcts", T: 10, S: 100, Fr: 10, Fi: 10, D: 25, C: 0, Gamma: 0.1, Ms: 0, Md: 1, Qv: 1, Shape: "deep narrow"},
	{Name: "failure_repro", Short: "fr", T: 1, S: 10, Fr: 10, Fi: 0, D: 1, C: 0, Gamma: 1.0, Ms: 5, Md: 45, Qv: 1, Shape: "flat, one worker"},
}

// node is one branch of a workflow's tree.
type node struct {
	name     string
	depth    int
	children int  // forks taken from it so far, pruned ones included
	ready    bool // its step has finished: it may be a parent
	live     bool // not pruned
}

// tree is the fork tree of one run. Safe for concurrent use.
type tree struct {
	mu       sync.Mutex
	w        workflow
	root     *node
	nodes    []*node // every node but the root, in creation order
	live     int     // live nodes, the root excluded
	peakLive int
	overflow int // parents chosen by the last clause: the root, although it was full
}

func newTree(w workflow, root string) *tree {
	return &tree{w: w, root: &node{name: root, ready: true, live: true}}
}

// room reports whether n may get one more child. t.mu is held.
func (t *tree) room(n *node) bool {
	fanout := t.w.Fi
	if n == t.root {
		fanout = t.w.Fr
	}
	return n.ready && n.live && n.depth < t.w.D && n.children < fanout
}

// pick chooses the parent of a worker's next fork, as BranchBench does: the worker's
// current node if it has depth and fanout left, else a uniformly random node that
// has, else the root. It counts the fork against the parent's fanout.
func (t *tree) pick(cur *node, rng *rand.Rand) *node {
	t.mu.Lock()
	defer t.mu.Unlock()
	var p *node
	if cur != nil && t.room(cur) {
		p = cur
	} else {
		var cands []*node
		if t.room(t.root) {
			cands = append(cands, t.root)
		}
		for _, n := range t.nodes {
			if t.room(n) {
				cands = append(cands, n)
			}
		}
		if len(cands) > 0 {
			p = cands[rng.IntN(len(cands))]
		} else {
			p = t.root
			t.overflow++
		}
	}
	p.children++
	return p
}

// add records a new child of parent, live but not ready yet.
func (t *tree) add(name string, parent *node) *node {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := &node{name: name, depth: parent.depth + 1, live: true}
	t.nodes = append(t.nodes, n)
	t.live++
	t.peakLive = max(t.peakLive, t.live)
	return n
}

// finish marks n's step done: pruned, or ready to be a parent.
func (t *tree) finish(n *node, pruned bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pruned {
		n.live = false
		t.live--
	} else {
		n.ready = true
	}
}

// drop forgets a node whose fork failed.
func (t *tree) drop(n *node) { t.finish(n, true) }

// liveNames lists the live branches, the root first.
func (t *tree) liveNames() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []string{t.root.name}
	for _, n := range t.nodes {
		if n.live {
			out = append(out, n.name)
		}
	}
	return out
}

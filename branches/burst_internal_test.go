package branches

import (
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

func TestWaitsOutBurst(t *testing.T) {
	m := newUnitManager(t, "")
	s := &sourceState{src: catalog.Source{Name: "s", Warm: 2}, lastClaim: m.now()}
	m.sources["s"] = s
	eph := func(name string) action { return action{k: key{"s", name}, kind: actDestroy, code: "ephemeral"} }
	waiting := map[string]int{}
	for i, tc := range []struct {
		a    action
		want bool
	}{
		{eph("a"), true},
		{action{k: key{"s", "x"}, kind: actDestroy, code: "ttl"}, false},
		{action{k: key{"s", "y"}, kind: actDestroy, code: "disk_budget", evict: true}, false},
		{action{k: key{"s", "z"}, kind: actStop, code: "idle"}, false},
		{action{k: key{"other", "o"}, kind: actDestroy, code: "ephemeral"}, false},
		{eph("b"), true},
		{eph("c"), false}, // the pool's size (2) waits already
	} {
		if got := m.waitsOutBurst(tc.a, waiting); got != tc.want {
			t.Errorf("%d: waitsOutBurst(%s %s of %s) = %v, want %v", i, tc.a.kind, tc.a.code, tc.a.k.name, got, tc.want)
		}
	}
	// No destroy waits when a pool member could not be started beside it.
	m.cfg.Policy.MaxRunning = 1
	m.branches[key{"s", "creating"}] = &branch{op: &op{what: "create"}}
	if m.waitsOutBurst(eph("d"), map[string]int{}) {
		t.Error("a destroy waits although --max-running leaves no room")
	}
	m.cfg.Policy.MaxRunning = 0
	s.lastClaim = m.now().Add(-claimRefillDelay)
	if m.waitsOutBurst(eph("d"), map[string]int{}) {
		t.Error("a destroy waits although the last claim is claimRefillDelay old")
	}
}

func TestStillEnded(t *testing.T) {
	for _, tc := range []struct {
		b    branch
		want bool
	}{
		{branch{rec: catalog.Branch{Ephemeral: true}, hadSession: true}, true},
		{branch{rec: catalog.Branch{Ephemeral: true}, hadSession: true, sessions: 1}, false}, // a session came
		{branch{rec: catalog.Branch{Ephemeral: true}}, false},                                // a new branch of the name, before its first session
		{branch{rec: catalog.Branch{}, hadSession: true}, false},                             // kept (ephemeral turned off)
	} {
		if got := stillEnded(&tc.b) == nil; got != tc.want {
			t.Errorf("stillEnded(ephemeral %v, had a session %v, %d sessions) passes = %v, want %v",
				tc.b.rec.Ephemeral, tc.b.hadSession, tc.b.sessions, got, tc.want)
		}
	}
}

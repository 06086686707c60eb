package branches

import (
	"testing"
	"time"
)

func TestPlan(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	k := func(n string) key { return key{"s", n} }
	base := Policy{IdleStop: 5 * time.Minute, QuotaPolicy: QuotaReset}
	tests := []struct {
		name     string
		p        Policy
		views    []view
		want     map[string]actionKind
		wantOver []string
	}{
		{"idle running stops", base, []view{{k: k("a"), running: true, lastUsedAt: ago(6 * time.Minute)}}, map[string]actionKind{"a": actStop}, nil},
		{"recently used stays", base, []view{{k: k("a"), running: true, lastUsedAt: ago(time.Minute)}}, nil, nil},
		{"stopped is not stopped again", base, []view{{k: k("a"), lastUsedAt: ago(time.Hour)}}, nil, nil},
		{"session protects everything", Policy{IdleStop: time.Second, TTL: time.Second, MaxAge: time.Second, Quota: 1, QuotaPolicy: QuotaReset},
			[]view{{k: k("a"), running: true, sessions: 1, ephemeral: true, owned: 100, createdAt: ago(time.Hour), lastUsedAt: ago(time.Hour)}},
			nil, []string{"a"}},
		{"busy is left alone", base, []view{{k: k("a"), running: true, busy: true, lastUsedAt: ago(time.Hour)}}, nil, nil},
		{"ephemeral destroyed", base, []view{{k: k("a"), running: true, ephemeral: true, lastUsedAt: now}}, map[string]actionKind{"a": actDestroy}, nil},
		{"server ttl", Policy{TTL: time.Hour}, []view{{k: k("a"), lastUsedAt: ago(2 * time.Hour)}, {k: k("b"), lastUsedAt: ago(time.Minute)}},
			map[string]actionKind{"a": actDestroy}, nil},
		{"branch ttl wins", Policy{TTL: time.Hour}, []view{{k: k("a"), ttl: time.Minute, lastUsedAt: ago(2 * time.Minute)}},
			map[string]actionKind{"a": actDestroy}, nil},
		{"max age", Policy{MaxAge: time.Hour}, []view{{k: k("a"), createdAt: ago(2 * time.Hour), lastUsedAt: now}},
			map[string]actionKind{"a": actDestroy}, nil},
		{"over quota resets", Policy{Quota: 100, QuotaPolicy: QuotaReset}, []view{{k: k("a"), owned: 101, lastUsedAt: now}},
			map[string]actionKind{"a": actReset}, []string{"a"}},
		{"over quota refuse keeps", Policy{Quota: 100, QuotaPolicy: QuotaRefuse}, []view{{k: k("a"), owned: 101, lastUsedAt: now}},
			nil, []string{"a"}},
		{"branch quota wins", Policy{Quota: 100, QuotaPolicy: QuotaReset}, []view{{k: k("a"), quota: 1000, owned: 101, lastUsedAt: now}},
			nil, nil},
		{"budget evicts least recently used first, never a busy one", Policy{DiskBudget: 250, QuotaPolicy: QuotaReset}, []view{
			{k: k("old"), owned: 100, lastUsedAt: ago(3 * time.Hour)},
			{k: k("new"), owned: 100, lastUsedAt: ago(time.Hour)},
			{k: k("recent"), owned: 100, lastUsedAt: now},
			{k: k("busy"), owned: 100, sessions: 1, lastUsedAt: ago(10 * time.Hour)},
		}, map[string]actionKind{"old": actReset, "new": actReset}, nil},
		{"pool members are never idle-stopped or expired", Policy{IdleStop: time.Second, TTL: time.Second, MaxAge: time.Second, QuotaPolicy: QuotaReset},
			[]view{{k: k("_pool-1"), pooled: true, running: true, owned: 10, createdAt: ago(time.Hour), lastUsedAt: ago(time.Hour)}}, nil, nil},
		{"budget takes pool members first", Policy{DiskBudget: 150, QuotaPolicy: QuotaReset}, []view{
			{k: k("old"), owned: 100, lastUsedAt: ago(3 * time.Hour)},
			{k: k("_pool-1"), pooled: true, running: true, owned: 60, lastUsedAt: now},
		}, map[string]actionKind{"_pool-1": actDestroy}, nil},
		{"budget counts the ephemeral destroyed first, then evicts least recently used", Policy{DiskBudget: 250, QuotaPolicy: QuotaReset}, []view{
			{k: k("old"), owned: 100, lastUsedAt: ago(3 * time.Hour)},
			{k: k("new"), owned: 100, lastUsedAt: ago(time.Hour)},
			{k: k("eph"), owned: 100, ephemeral: true, lastUsedAt: now},
			{k: k("busy"), owned: 100, sessions: 1, lastUsedAt: ago(10 * time.Hour)},
		}, map[string]actionKind{"eph": actDestroy, "old": actReset}, nil},
		{"budget with refuse policy evicts nothing resettable", Policy{DiskBudget: 10, QuotaPolicy: QuotaRefuse}, []view{
			{k: k("a"), owned: 100, lastUsedAt: ago(time.Hour)},
		}, nil, nil},
		{"budget within reserve", Policy{DiskBudget: 250, DiskReserve: 100, QuotaPolicy: QuotaReset}, []view{
			{k: k("a"), owned: 100, lastUsedAt: ago(time.Hour)},
		}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			acts, over := plan(tc.p, now, tc.views)
			got := map[string]actionKind{}
			for _, a := range acts {
				if _, dup := got[a.k.name]; dup {
					t.Errorf("two actions for %s", a.k.name)
				}
				got[a.k.name] = a.kind
				if a.reason == "" || a.code == "" {
					t.Errorf("action without reason: %+v", a)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("actions %v, want %v", got, tc.want)
			}
			for n, kind := range tc.want {
				if got[n] != kind {
					t.Errorf("%s: %q, want %q", n, got[n], kind)
				}
			}
			if len(over) != len(tc.wantOver) {
				t.Errorf("over quota %v, want %v", over, tc.wantOver)
			}
			for _, n := range tc.wantOver {
				if !over[k(n)] {
					t.Errorf("%s not over quota", n)
				}
			}
		})
	}
}

package branches

import (
	"context"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// The reaper prunes the logs by the retention settings, then leaves them alone for
// pruneEvery; with no retention set it never deletes.
func TestPruneLogs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "")
	old := time.Now().Add(-48 * time.Hour)
	addStopped(t, m, "b", old)
	audit := func(at time.Time) {
		if err := m.cat.AppendAudit(ctx, catalog.AuditEntry{At: at, Actor: "local", Action: "branch.create", Result: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	audit(old)
	count := func() (int, int) {
		log, err := m.cat.Transitions(ctx, "s", "b")
		if err != nil {
			t.Fatal(err)
		}
		entries, err := m.cat.Audit(ctx, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return len(log), len(entries)
	}

	m.pruneLogs(ctx) // nothing set: everything stays
	if tr, au := count(); tr != 1 || au != 1 {
		t.Fatalf("without retention: %d transitions, %d audit entries; want 1, 1", tr, au)
	}

	// The transition was logged now; the audit entry is two days old.
	m.cfg.Policy = Policy{HistoryKeep: time.Hour, AuditKeep: 24 * time.Hour}
	m.pruneLogs(ctx)
	if tr, au := count(); tr != 1 || au != 0 {
		t.Fatalf("after pruning: %d transitions, %d audit entries; want 1, 0", tr, au)
	}

	audit(old) // within pruneEvery of the last pruning: kept until the next one
	m.pruneLogs(ctx)
	if _, au := count(); au != 1 {
		t.Fatalf("pruned again within %s: %d audit entries left", pruneEvery, au)
	}
	m.lastPrune = m.lastPrune.Add(-pruneEvery)
	m.pruneLogs(ctx)
	if _, au := count(); au != 0 {
		t.Fatalf("not pruned after %s: %d audit entries left", pruneEvery, au)
	}
}

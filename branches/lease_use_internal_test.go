package branches

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
)

// A session that could not reach its server does not count as a use of the branch.
func TestLeaseUseFailedDial(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		failed  bool
		between bool // another session used the branch in the meantime
		want    time.Time
	}{
		{"used", false, false, t0.Add(2 * time.Minute)},
		{"failed", true, false, t0},
		{"failed, other session since", true, true, t0.Add(90 * time.Second)},
	} {
		b := &branch{}
		var u leaseUse
		u.prev, u.at = t0, t0.Add(time.Minute)
		b.rec.LastUsedAt = u.at
		if tc.between {
			b.rec.LastUsedAt = t0.Add(90 * time.Second)
		}
		u.failed.Store(tc.failed)
		u.release(b, t0.Add(2*time.Minute))
		if !b.rec.LastUsedAt.Equal(tc.want) {
			t.Errorf("%s: last use %s, want %s", tc.name, b.rec.LastUsedAt, tc.want)
		}
	}
}

// exitedInstance is a branch server that has exited.
type exitedInstance struct{ runtime.Instance }

func (exitedInstance) Done() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// A session whose server exited under its lease, and that cannot be started again
// because the manager is closing, fails with ErrClosed (the client's 57P01), not
// with the refused dial (an internal error).
func TestLeaseDialServerGoneForGood(t *testing.T) {
	t.Parallel()
	m := &Manager{closed: true}
	l := &Lease{m: m, b: &branch{}, socket: filepath.Join(t.TempDir(), ".s.PGSQL.5432")}
	l.use.inst = exitedInstance{}
	c, err := l.Dial(context.Background())
	if err == nil {
		c.Close()
		t.Fatal("dialed a socket that does not exist")
	}
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("dial: %v, want ErrClosed", err)
	}
	if !l.use.failed.Load() {
		t.Error("the failed dial counts as a use of the branch")
	}
}

// A session whose server went with its branch (Destroy with Force) while it
// dialed is told that the branch is gone, and nothing starts a server for it.
func TestLeaseDialBranchDestroyed(t *testing.T) {
	t.Parallel()
	m := &Manager{branches: map[key]*branch{}}
	b := &branch{}
	b.rec.Source, b.rec.Name = "s", "gone"
	l := &Lease{m: m, b: b, socket: filepath.Join(t.TempDir(), ".s.PGSQL.5432")}
	l.use.inst = exitedInstance{}
	c, err := l.Dial(context.Background())
	if err == nil {
		c.Close()
		t.Fatal("dialed a socket that does not exist")
	}
	if !errors.Is(err, ErrEnded) {
		t.Fatalf("dial: %v, want ErrEnded", err)
	}
	if b.op != nil {
		t.Errorf("an operation (%s) was started on the destroyed branch", b.op.what)
	}
}

// A branch made ephemeral after it had sessions has that recorded in the catalog,
// so that a restart destroys it at its next session's end (reconcile); one that
// had none is still recorded as unused.
func TestMadeEphemeralRecordsSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "")
	t0 := time.Now().UTC()
	used, unused := addStopped(t, m, "used", t0), addStopped(t, m, "unused", t0)
	used.hadSession = true // a session ended before it was made ephemeral
	on := true
	for _, name := range []string{"used", "unused"} {
		if err := m.Set(ctx, "s", name, Settings{Ephemeral: &on}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := m.cat.Branches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]bool{used.rec.ID: true, unused.rec.ID: false}
	for _, r := range all {
		if had, ok := want[r.ID]; ok && (!r.Ephemeral || r.HadSession != had) {
			t.Errorf("%s in the catalog: ephemeral %v, had a session %v; want true, %v", r.Name, r.Ephemeral, r.HadSession, had)
		}
	}
}

// When the record of a branch's past sessions cannot be written (here the row is
// fenced), making it ephemeral fails and changes nothing: no mark without the
// record.
func TestMadeEphemeralRecordFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newUnitManager(t, "")
	b, newer := fencedBranch(t, m, "b")
	b.hadSession = true
	on := true
	if err := m.Set(ctx, "s", "b", Settings{Ephemeral: &on}); !errors.Is(err, ErrFenced) {
		t.Fatalf("Set ephemeral on a fenced branch = %v, want ErrFenced", err)
	}
	all, err := newer.Branches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		if r.ID == b.rec.ID && (r.Ephemeral || r.HadSession) {
			t.Errorf("catalog after the failed change: ephemeral %v, had a session %v; want neither", r.Ephemeral, r.HadSession)
		}
	}
	m.mu.Lock()
	eph := b.rec.Ephemeral
	m.mu.Unlock()
	if eph {
		t.Error("the branch is ephemeral in memory after the failed change")
	}
}

// A session whose server an administrator stopped under it (Stop with Force) while
// it dialed ends with ErrEnded: it does not wake the branch again.
func TestLeaseDialBranchStopped(t *testing.T) {
	t.Parallel()
	m := &Manager{branches: map[key]*branch{}}
	b := &branch{}
	b.rec.Source, b.rec.Name = "s", "stopped"
	m.branches[key{"s", "stopped"}] = b
	stop := &op{what: "stop", done: make(chan struct{})}
	close(stop.done)
	b.op = stop
	l := &Lease{m: m, b: b, socket: filepath.Join(t.TempDir(), ".s.PGSQL.5432")}
	l.use.inst = exitedInstance{}
	if c, err := l.Dial(context.Background()); !errors.Is(err, ErrEnded) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial: %v, want ErrEnded", err)
	}
	if b.op != stop {
		t.Errorf("an operation (%s) was started on the stopped branch", b.op.what)
	}
}

// Force ends client sessions, never the engine's own work on the branch.
func TestForceWaitsForInternalLeases(t *testing.T) {
	t.Parallel()
	m := newUnitManager(t, "")
	b := addStopped(t, m, "b", time.Now().UTC())
	b.sessions, b.internal = 2, 1
	force := OpOptions{Force: true}
	if err := m.Stop(context.Background(), "s", "b", force); !errors.Is(err, ErrBusy) {
		t.Fatalf("forced stop during a fork of the branch: %v, want ErrBusy", err)
	}
	if err := m.Stop(context.Background(), "s", "b", OpOptions{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("stop with sessions: %v, want ErrBusy", err)
	}
	b.sessions, b.internal = 1, 0
	if err := m.Stop(context.Background(), "s", "b", force); err != nil {
		t.Fatalf("forced stop with a client session: %v", err)
	}
}

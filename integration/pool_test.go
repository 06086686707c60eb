package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pooled lists the warm pool members.
func (s *server) pooled() []branchInfo {
	s.t.Helper()
	var list []branchInfo
	if err := json.Unmarshal([]byte(s.mustCLI("branch", "ls", "--all", "--json")), &list); err != nil {
		s.t.Fatal(err)
	}
	var out []branchInfo
	for _, b := range list {
		if b.State == "pooled" {
			out = append(out, b)
		}
	}
	return out
}

// poolEvents reads the claim and miss counters.
func (s *server) poolEvents(t *testing.T) (claims, misses int) {
	t.Helper()
	m := s.metrics(t)
	get := func(ev string) int {
		re := regexp.MustCompile(`pgbranch_pool_events_total\{event="` + ev + `"\} (\d+)`)
		if sm := re.FindStringSubmatch(m); sm != nil {
			n, _ := strconv.Atoi(sm[1])
			return n
		}
		return 0
	}
	return get("claim"), get("miss")
}

func waitPool(t *testing.T, s *server, n int) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("%d pooled branches", n), func() bool { return len(s.pooled()) == n })
}

// TestWarmPool: pooled branches are made ahead, claimed by new names with the
// connection's options, refilled, replaced after a refresh, and rebuilt after a crash.
func TestWarmPool(t *testing.T) {
	state := newStateDir(t)
	const idleTimeout = 3 * time.Second
	s := startServer(t, state, "--warm", "2", "--reap-interval", "200ms", "--warm-user", "postgres",
		"--server-idle-timeout", idleTimeout.String())
	s.seedSQL("app", lifecycleSQL)
	waitPool(t, s, 2)
	if got := s.branches(); len(got) != 0 {
		t.Fatalf("branch ls shows pool members: %+v", got)
	}
	// The sessions opened ahead wait for the first client however long it takes:
	// --server-idle-timeout is for sessions clients left.
	time.Sleep(idleTimeout + time.Second)
	for _, p := range s.pooled() {
		if p.IdleServers == 0 {
			t.Errorf("pool member %s has no server session opened ahead (--warm-user postgres) after %s", p.Name, idleTimeout+time.Second)
		}
	}

	// A claim carries the connection's options.
	c := s.connect(t, "app@claimed", "options='-c pgbranch.ttl=2h -c pgbranch.quota=1GB'")
	if _, err := c.Exec(context.Background(), "UPDATE t SET v = 'claimed' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	b := s.branches()["claimed"]
	if b.TTL != "2h0m0s" || b.Quota != 1<<30 || b.State != "running" {
		t.Fatalf("claimed branch: %+v", b)
	}
	if claims, _ := s.poolEvents(t); claims != 1 {
		t.Fatalf("claims = %d, want 1", claims)
	}
	if m := s.metrics(t); !regexp.MustCompile(`pgbranch_proxy_server_sessions_reused_total [1-9]`).MatchString(m) {
		t.Errorf("the claim forked a backend: no server session opened ahead was used\n%s", m)
	}
	// The second session opened ahead is the claimed branch's from the claim on,
	// not expired at the next pass for having been opened long before.
	time.Sleep(time.Second)
	if n := s.branches()["claimed"].IdleServers; n != 1 {
		t.Errorf("the claimed branch has %d sessions parked a second after its claim, want the second one opened ahead", n)
	}
	// The session opened ahead was warmed with a query; it left no unnamed
	// statement behind, as a new session has none.
	waitPool(t, s, 2)
	fresh := s.connect(t, "app@fresh")
	_, err := fresh.PgConn().ExecPrepared(context.Background(), "", nil, nil, nil).Close()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "26000" {
		t.Errorf("executing the unnamed statement on a claimed session: %v, want 26000 (none exists)", err)
	}
	waitPool(t, s, 2)
	eph := s.connect(t, "app@eph", "options='-c pgbranch.ephemeral=on'")
	eph.Close(context.Background())
	eventually(t, 10*time.Second, "ephemeral claimed branch destroyed", func() bool { _, ok := s.branches()["eph"]; return !ok })

	// 20 clients race for 20 new names: every name gets a branch of its own, no
	// pooled branch is handed out twice, each sees only its own write.
	waitPool(t, s, 2)
	claims0, misses0 := s.poolEvents(t)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("race-%d", i)
			conn, err := s.connectErr2("app@"+name, fmt.Sprintf("UPDATE t SET v = '%s' WHERE id = 2", name))
			if err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				return
			}
			_ = conn
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	claims, misses := s.poolEvents(t)
	if got := (claims - claims0) + (misses - misses0); got != 20 || claims-claims0 < 2 {
		t.Errorf("claims %d + misses %d over the race, want 20 with at least the 2 pooled claimed", claims-claims0, misses-misses0)
	}
	all := s.branches()
	for i := range 20 {
		name := fmt.Sprintf("race-%d", i)
		if _, ok := all[name]; !ok {
			t.Errorf("no branch %s", name)
			continue
		}
		if out, err := s.psql(t, "app@"+name, "SELECT v FROM t WHERE id = 2"); err != nil || out != name {
			t.Errorf("%s sees %q (%v): a pooled branch was shared", name, out, err)
		}
	}

	// After a refresh, no member of the old generation is handed out.
	waitPool(t, s, 2)
	sqlFile := filepath.Join(filepath.Dir(s.state), "app.sql")
	if err := os.WriteFile(sqlFile, []byte(lifecycleSQL+"INSERT INTO t VALUES (5000, 'refreshed');"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.mustCLI("source", "refresh", "app")
	if out, err := s.psql(t, "app@after-refresh", "SELECT v FROM t WHERE id = 5000"); err != nil || out != "refreshed" {
		t.Fatalf("a new branch after refresh sees %q (%v), want the new generation", out, err)
	}

	// kill -9 with a pool: the next start stops the strays and rebuilds the pool.
	waitPool(t, s, 2)
	s.kill9()
	s2 := startServer(t, state, "--warm", "2", "--reap-interval", "200ms")
	waitPool(t, s2, 2)
	if out, err := s2.psql(t, "app@claimed", "SELECT v FROM t WHERE id = 1"); err != nil || out != "claimed" {
		t.Fatalf("claimed branch after restart: %q %v", out, err)
	}
}

// connectErr2 connects to db, runs sql and closes.
func (s *server) connectErr2(db, sql string) (struct{}, error) {
	out, err := s.psql(s.t, db, sql)
	if err != nil {
		return struct{}{}, fmt.Errorf("%v: %s", err, out)
	}
	return struct{}{}, nil
}

// TestClaimFailureFallsBackToCold: when recording a claim fails, the pool member is
// destroyed and the connection gets a branch created cold, not an error.
func TestClaimFailureFallsBackToCold(t *testing.T) {
	t.Setenv(failpointsEnv, "catalog.claimed@victim=1*error")
	state := newStateDir(t)
	s := startServer(t, state, "--warm", "1", "--reap-interval", "200ms")
	s.seedSQL("app", lifecycleSQL)
	waitPool(t, s, 1)
	if out, err := s.psql(t, "app@victim", "UPDATE t SET v = 'mine' WHERE id = 1"); err != nil {
		t.Fatalf("connect after a failed claim: %q %v, want a cold-created branch", out, err)
	}
	if out, err := s.psql(t, "app@victim", "SELECT v FROM t WHERE id = 1"); err != nil || out != "mine" {
		t.Fatalf("connect after a failed claim: %q %v, want a cold-created branch", out, err)
	}
	if claims, _ := s.poolEvents(t); claims != 0 {
		t.Errorf("claims = %d, want 0: the only claim failed", claims)
	}
	if b := s.branches()["victim"]; b.State != "running" {
		t.Errorf("victim = %+v, want running", b)
	}
	waitPool(t, s, 1) // the destroyed member is replaced
	if out, err := s.psql(t, "app@second", "SELECT v FROM t WHERE id = 1"); err != nil || out == "mine" {
		t.Fatalf("a later claim sees %q (%v)", out, err)
	}
}

// TestPoolFillsAtOnce: a pool larger than the creations allowed at once fills as
// members become ready, not one batch per reaper pass.
func TestPoolFillsAtOnce(t *testing.T) {
	s := startServer(t, newStateDir(t), "--warm", "5", "--max-creating", "2", "--reap-interval", "1h")
	s.seedSQL("app", lifecycleSQL)
	waitPool(t, s, 5)
}

// ephOption makes a connection's branch ephemeral.
const ephOption = "options='-c pgbranch.ephemeral=on'"

// endEphemeral opens the only session of the ephemeral branch app@name, writes v
// into row 1 and closes the session, and waits until the proxy has seen it end.
func endEphemeral(t *testing.T, s *server, name, v string) {
	t.Helper()
	c := s.connect(t, "app@"+name, ephOption)
	if _, err := c.Exec(context.Background(), "UPDATE t SET v = '"+v+"' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	c.Close(context.Background())
	eventually(t, 5*time.Second, "the session of "+name+" ended", func() bool { b, ok := s.branches()[name]; return !ok || b.Sessions == 0 })
}

// rowOne reads row 1's value on c.
func rowOne(c *pgx.Conn) (string, error) {
	var v string
	err := c.QueryRow(context.Background(), "SELECT v FROM t WHERE id = 1").Scan(&v)
	return v, err
}

// TestEphemeralEndedNameIsNew: an ephemeral branch is gone once its last session
// has ended, also while its destroy waits for a burst of claims to pause (the
// claim of its own pool member a moment before is one): a new connection to its
// name gets a new branch, and both are destroyed after their sessions.
func TestEphemeralEndedNameIsNew(t *testing.T) {
	state := newStateDir(t)
	s := startServer(t, state, "--warm", "3", "--reap-interval", "200ms")
	s.seedSQL("app", lifecycleSQL)
	waitPool(t, s, 3)
	ctx := context.Background()
	endEphemeral(t, s, "e", "first")
	c2 := s.connect(t, "app@e", ephOption)
	v, err := rowOne(c2)
	if err != nil {
		t.Fatal(err)
	}
	if v != "seed" {
		t.Errorf("a session on the name of an ephemeral branch whose last session ended sees %q, want the seed's row", v)
	}
	c2.Close(ctx)
	eventually(t, 10*time.Second, "ephemeral branch destroyed", func() bool { _, ok := s.branches()["e"]; return !ok })

	// A shutdown right after the last session destroys the branch rather than
	// stopping it, leaving nothing for the next run to destroy.
	waitPool(t, s, 3)
	endEphemeral(t, s, "e", "third")
	s.stop()
	s2 := startServer(t, state, "--warm", "3", "--reap-interval", "200ms")
	if b, ok := s2.branches()["e"]; ok {
		t.Errorf("an ephemeral branch whose last session ended before a shutdown is there after it: %+v", b)
	}
}

// endedUndestroyable starts a proxy whose first two unmounts of branch e fail, and
// ends the only session of the ephemeral branch e on it.
func endedUndestroyable(t *testing.T) *server {
	t.Helper()
	t.Setenv(failpointsEnv, "unmount@e=2*error")
	s := startServer(t, newStateDir(t), "--warm", "2", "--reap-interval", "1m")
	s.seedSQL("app", lifecycleSQL)
	waitPool(t, s, 2)
	endEphemeral(t, s, "e", "first")
	return s
}

// TestEphemeralEndedDestroyFails: while the destroy of an ephemeral branch whose
// last session ended fails, a connection to its name is refused with 57P03 rather
// than served the old branch (or an internal error), and once a destroy
// succeeds the name gets a new branch.
func TestEphemeralEndedDestroyFails(t *testing.T) {
	s := endedUndestroyable(t)
	// The reaper's destroy (a moment after the session's end) and this
	// connection's fail, whichever comes first; this connection sees one of them.
	if _, err := s.connectErr("app@e", ephOption); pgCode(err) != "57P03" {
		t.Fatalf("a connection while the ended branch's destroy fails: %v, want 57P03", err)
	}
	eventually(t, 10*time.Second, "a connection to the name", func() bool {
		_, err := s.connectErr("app@e", ephOption)
		return err == nil
	})
	c2 := s.connect(t, "app@e", ephOption)
	defer c2.Close(context.Background())
	if v, err := rowOne(c2); err != nil || v != "seed" {
		t.Errorf("the new branch of the name: %q, %v, want the seed's row", v, err)
	}
}

// TestCreateOverEndedEphemeral: the admin API's create of the name of an ephemeral
// branch whose last session ended destroys that branch first, as a connection
// does (it is gone for clients), and refuses with a "try again" (503) while that
// destroy fails, rather than saying the name exists.
func TestCreateOverEndedEphemeral(t *testing.T) {
	s := endedUndestroyable(t)
	// The reaper's destroy (kicked by the session's end) and this create's fail,
	// whichever comes first; this create sees its own.
	if out, err := s.cli("branch", "create", "e"); err == nil || !strings.Contains(out, "could not be destroyed yet") {
		t.Fatalf("a create while the ended branch's destroy fails: %v\n%s", err, out)
	}
	eventually(t, 10*time.Second, "a create of the name", func() bool {
		_, err := s.cli("branch", "create", "e")
		return err == nil
	})
	c := s.connect(t, "app@e")
	defer c.Close(context.Background())
	if v, err := rowOne(c); err != nil || v != "seed" {
		t.Errorf("the branch created over the ended one: %q, %v, want the seed's row", v, err)
	}
	if b := s.branches()["e"]; b.Ephemeral {
		t.Errorf("the branch created over the ended one is still ephemeral: %+v", b)
	}
}

// TestPoolAutovacuum: a warm pool member's server runs without autovacuum (its
// launcher would fork a worker per database all the time), and a claimed branch
// gets it back: a while after its claim, or at its next start if that comes first.
func TestPoolAutovacuum(t *testing.T) {
	s := startServer(t, newStateDir(t), "--warm", "2", "--reap-interval", "200ms")
	s.seedSQL("app", lifecycleSQL)
	waitPool(t, s, 2)
	ctx := context.Background()
	show := func(name string) string {
		c := s.connect(t, "app@"+name)
		defer c.Close(ctx)
		var v string
		if err := c.QueryRow(ctx, "SHOW autovacuum").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, name := range []string{"later", "woken"} {
		if v := show(name); v != "off" {
			t.Fatalf("autovacuum on a branch just claimed from the pool: %s, want off", v)
		}
	}
	// ALTER SYSTEM rewrites postgresql.auto.conf: what keeps autovacuum off is
	// not in it, and goes with the member's server.
	c := s.connect(t, "app@woken")
	if _, err := c.Exec(ctx, "ALTER SYSTEM SET work_mem = '5MB'"); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	s.mustCLI("branch", "stop", "woken")
	if v := show("woken"); v != "on" {
		t.Errorf("autovacuum on a claimed branch started again: %s, want on", v)
	}
	c = s.connect(t, "app@woken")
	var workMem string
	if err := c.QueryRow(ctx, "SHOW work_mem").Scan(&workMem); err != nil || workMem != "5MB" {
		t.Errorf("work_mem set by ALTER SYSTEM on a claimed branch, after its restart: %s %v", workMem, err)
	}
	c.Close(ctx)
	eventually(t, 20*time.Second, "autovacuum on the claimed branch", func() bool { return show("later") == "on" })
	c = s.connect(t, "app@later")
	defer c.Close(ctx)
	var launchers int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum launcher'").Scan(&launchers); err != nil || launchers != 1 {
		t.Errorf("autovacuum launchers on the claimed branch: %d %v, want 1", launchers, err)
	}
}

// warmRelationsSQL has more relations than a session opened ahead opens, of
// every kind it opens, in more than one schema, some no role but the owner may
// read.
var warmRelationsSQL = func() string {
	var b strings.Builder
	b.WriteString(lifecycleSQL)
	b.WriteString(`CREATE SCHEMA other;
CREATE TABLE other.parted (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE other.parted_1 PARTITION OF other.parted FOR VALUES FROM (0) TO (1000);
CREATE MATERIALIZED VIEW other.mv AS SELECT id FROM t;
CREATE UNLOGGED TABLE other.scratch (id int);
CREATE ROLE nobody_reads LOGIN;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pg_indexes_size(regclass) FROM PUBLIC;
`)
	for i := range 120 {
		fmt.Fprintf(&b, "CREATE TABLE many_%d (id int PRIMARY KEY, v text);\n", i)
	}
	return b.String()
}()

// TestPoolWarmsRelations: a session opened ahead opens the database's relations
// before its client comes (their relation cache entries), on a seed with more
// relations than it opens and of every kind; for a role that may not (no EXECUTE
// on pg_indexes_size) the session is opened all the same; its client finds it
// idle with no lock left.
func TestPoolWarmsRelations(t *testing.T) {
	s := startServer(t, newStateDir(t), "--warm", "1", "--reap-interval", "200ms",
		"--warm-user", "postgres", "--warm-user", "nobody_reads")
	s.seedSQL("app", warmRelationsSQL)
	waitPool(t, s, 1)
	eventually(t, 30*time.Second, "sessions opened ahead", func() bool {
		p := s.pooled()
		return len(p) == 1 && p[0].IdleServers >= 2
	})
	ctx := context.Background()
	c := s.connect(t, "app@claimed", "user=nobody_reads")
	defer c.Close(ctx)
	var locks int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'relation' AND relation >= 16384").Scan(&locks); err != nil || locks != 0 {
		t.Errorf("user relations locked by the claimed session: %d %v, want 0", locks, err)
	}
	if m := s.metrics(t); !regexp.MustCompile(`pgbranch_proxy_server_sessions_reused_total [1-9]`).MatchString(m) {
		t.Errorf("the claim forked a backend: no server session opened ahead was used\n%s", m)
	}
	var user string
	if err := c.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil || user != "nobody_reads" {
		t.Errorf("current_user on the claimed session: %q %v", user, err)
	}
	var n int
	if err := s.connect(t, "app@claimed").QueryRow(ctx, "SELECT count(*) FROM other.parted").Scan(&n); err != nil {
		t.Errorf("a partitioned table on the claimed branch: %v", err)
	}
}

// TestPoolLearnsKeys: members made before any client came (no --warm-user) open
// sessions ahead for the startup key of the first claim once claims pause, so
// that the claims after it fork no backend.
func TestPoolLearnsKeys(t *testing.T) {
	s := startServer(t, newStateDir(t), "--warm", "3", "--reap-interval", "200ms")
	s.seedSQL("app", lifecycleSQL)
	waitPool(t, s, 3)
	ctx := context.Background()
	s.connect(t, "app@first").Close(ctx)
	eventually(t, 30*time.Second, "every pool member with a session opened ahead", func() bool {
		p := s.pooled()
		for _, b := range p {
			if b.IdleServers == 0 {
				return false
			}
		}
		return len(p) == 3
	})
	before := serverSessionsOpened(t, s)
	for _, name := range []string{"a", "b", "c"} {
		s.connect(t, "app@"+name).Close(ctx)
	}
	if after := serverSessionsOpened(t, s); after != before {
		t.Errorf("three claims after the first forked %d backends, want none", after-before)
	}
}

// serverSessionsOpened is how many server sessions the proxy has opened (forked)
// for clients.
func serverSessionsOpened(t *testing.T, s *server) int {
	t.Helper()
	sm := regexp.MustCompile(`(?m)^pgbranch_proxy_server_sessions_opened_total (\d+)$`).FindStringSubmatch(s.metrics(t))
	if sm == nil {
		t.Fatal("no pgbranch_proxy_server_sessions_opened_total in the metrics")
	}
	n, _ := strconv.Atoi(sm[1])
	return n
}

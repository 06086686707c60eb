package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const reuseSQL = `CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT g, 'seed' FROM generate_series(1, 100) g;
CREATE ROLE other NOLOGIN;`

// parkedOn waits until the branch has n server sessions parked.
func parkedOn(t *testing.T, s *server, branch string, n int) {
	t.Helper()
	eventually(t, 10*time.Second, "server sessions parked", func() bool { return s.branches()[branch].IdleServers == n })
}

func scalar[T any](t *testing.T, c *pgx.Conn, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := c.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// TestReusedSessionLeaksNothing: a second client handed the server session of a
// first one sees none of the first one's session state, and both are told the
// backend's real PID.
func TestReusedSessionLeaksNothing(t *testing.T) {
	s := startServer(t, newStateDir(t))
	s.seedSQL("app", reuseSQL)
	ctx := context.Background()
	first := s.connect(t, "app@reuse", "application_name=first")
	pid := first.PgConn().PID()
	if got := scalar[int32](t, first, "SELECT pg_backend_pid()"); uint32(got) != pid {
		t.Fatalf("client told pid %d, pg_backend_pid() = %d", pid, got)
	}
	for _, sql := range []string{
		"CREATE TEMP TABLE scratch (x int)",
		"PREPARE sqlprep AS SELECT 1",
		"SET work_mem = '7MB'",
		"SELECT pg_advisory_lock(42)",
		"LISTEN somewhere",
		"DECLARE held CURSOR WITH HOLD FOR SELECT * FROM t",
		"SET ROLE other",
	} {
		if _, err := first.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if _, err := first.Prepare(ctx, "protoprep", "SELECT $1::int"); err != nil {
		t.Fatal(err)
	}
	first.Close(ctx)
	parkedOn(t, s, "reuse", 1)

	second := s.connect(t, "app@reuse", "application_name=second")
	if second.PgConn().PID() != pid {
		t.Fatalf("second client got pid %d, want the parked session's %d", second.PgConn().PID(), pid)
	}
	for sql, want := range map[string]string{
		"SELECT count(*)::text FROM pg_class WHERE relpersistence = 't'":                             "0",
		"SELECT count(*)::text FROM pg_prepared_statements":                                          "0",
		"SELECT current_setting('work_mem')":                                                         "4MB",
		"SELECT count(*)::text FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()": "0",
		"SELECT count(*)::text FROM pg_listening_channels()":                                         "0",
		"SELECT current_user::text":                                                                  "postgres",
		"SELECT count(*)::text FROM pg_cursors":                                                      "0",
		"SELECT current_setting('application_name')":                                                 "second",
		"SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()":                 "second",
	} {
		var got string
		if err := second.QueryRow(ctx, sql, pgx.QueryExecModeSimpleProtocol).Scan(&got); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", sql, got, want)
		}
	}
	if got := second.PgConn().ParameterStatus("application_name"); got != "second" {
		t.Errorf("ParameterStatus application_name = %q", got)
	}
	if got := second.PgConn().ParameterStatus("is_superuser"); got != "on" {
		t.Errorf("ParameterStatus is_superuser = %q, want the start-up's on", got)
	}
	// NOTIFY self-filtering: a notification's PID is the client's own.
	if _, err := second.Exec(ctx, "LISTEN mine; NOTIFY mine, 'hello'"); err != nil {
		t.Fatal(err)
	}
	n, err := second.WaitForNotification(ctxWithin(t, 5*time.Second))
	if err != nil || n.PID != pid || n.Payload != "hello" {
		t.Fatalf("notification %+v %v, want one from pid %d", n, err, pid)
	}
}

func ctxWithin(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestNoReuseMidTransactionOrCopy: a client that leaves inside a transaction, or in
// the middle of a COPY, never has its server session handed to anyone.
func TestNoReuseMidTransactionOrCopy(t *testing.T) {
	s := startServer(t, newStateDir(t))
	s.seedSQL("app", reuseSQL)
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		leave func(t *testing.T, c *pgx.Conn)
	}{
		{"in a transaction", func(t *testing.T, c *pgx.Conn) {
			if _, err := c.Exec(ctx, "BEGIN; UPDATE t SET v = 'uncommitted' WHERE id = 1"); err != nil {
				t.Fatal(err)
			}
			c.Close(ctx)
		}},
		{"dead in a transaction", func(t *testing.T, c *pgx.Conn) {
			if _, err := c.Exec(ctx, "BEGIN; UPDATE t SET v = 'uncommitted' WHERE id = 1"); err != nil {
				t.Fatal(err)
			}
			c.PgConn().Conn().Close() // no Terminate: the client just dies
		}},
		{"mid copy", func(t *testing.T, c *pgx.Conn) {
			conn := c.PgConn().Conn()
			q, _ := (&pgxQuery{"COPY t FROM STDIN"}).encode()
			if _, err := conn.Write(append(q, copyData("1000\tcopied\n")...)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // let the server take the COPY in
			conn.Close()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			branch := "r-" + map[string]string{"in a transaction": "tx", "dead in a transaction": "dead", "mid copy": "copy"}[c.name]
			conn := s.connect(t, "app@"+branch)
			pid := conn.PgConn().PID()
			c.leave(t, conn)
			eventually(t, 10*time.Second, "session ended", func() bool { return s.branches()[branch].Sessions == 0 })
			if n := s.branches()[branch].IdleServers; n != 0 {
				t.Fatalf("%d server sessions parked", n)
			}
			next := s.connect(t, "app@"+branch)
			if next.PgConn().PID() == pid {
				t.Fatal("the next client got the abandoned server session")
			}
			if v := scalar[string](t, next, "SELECT v FROM t WHERE id = 1"); v != "seed" {
				t.Fatalf("uncommitted write visible: %q", v)
			}
			if n := scalar[int64](t, next, "SELECT count(*) FROM t WHERE id = 1000"); n != 0 {
				t.Fatal("a half-done COPY was committed")
			}
		})
	}
}

// TestTerminateReportedPID: pg_terminate_backend of the PID the driver reports ends
// that client's session, and the dead server session is never handed out.
func TestTerminateReportedPID(t *testing.T) {
	s := startServer(t, newStateDir(t))
	s.seedSQL("app", reuseSQL)
	ctx := context.Background()
	victim := s.connect(t, "app@term")
	admin := s.connect(t, "app@term")
	if !scalar[bool](t, admin, "SELECT pg_terminate_backend($1)", int32(victim.PgConn().PID())) {
		t.Fatal("pg_terminate_backend found no such backend")
	}
	var pe *pgconn.PgError
	_, err := victim.Exec(ctx, "SELECT 1")
	if err == nil {
		t.Fatal("the terminated client's session still works")
	}
	if errors.As(err, &pe) && pe.Code != "57P01" {
		t.Fatalf("error %s, want 57P01 or a closed connection", pe.Code)
	}
	next := s.connect(t, "app@term")
	if next.PgConn().PID() == victim.PgConn().PID() {
		t.Fatal("got the terminated backend")
	}
	scalar[int32](t, next, "SELECT 1")
}

// TestCancelWithReuse: a cancel through the proxy reaches the query it was meant
// for, and a reused session's cancel key is its own.
func TestCancelWithReuse(t *testing.T) {
	s := startServer(t, newStateDir(t))
	s.seedSQL("app", reuseSQL)
	ctx := context.Background()
	first := s.connect(t, "app@cancel")
	first.Close(ctx)
	parkedOn(t, s, "cancel", 1)
	c := s.connect(t, "app@cancel")
	watcher := s.connect(t, "app@cancel")
	done := make(chan error, 1)
	go func() { _, err := c.Exec(ctx, "SELECT pg_sleep(30)"); done <- err }()
	eventually(t, 10*time.Second, "query running", func() bool {
		return scalar[int64](t, watcher, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active' AND query LIKE '%pg_sleep%'", int32(c.PgConn().PID())) == 1
	})
	if err := c.PgConn().CancelRequest(ctxWithin(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "57014" {
			t.Fatalf("cancelled query: %v, want 57014", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("cancel did not reach the query")
	}
	scalar[int32](t, c, "SELECT 1")
}

// pgxQuery frames a simple Query message by hand, for a client that dies mid-protocol.
type pgxQuery struct{ sql string }

func (q *pgxQuery) encode() ([]byte, error) {
	n := 4 + len(q.sql) + 1
	b := []byte{'Q', byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	b = append(b, q.sql...)
	return append(b, 0), nil
}

func copyData(s string) []byte {
	n := 4 + len(s)
	return append([]byte{'d', byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, s...)
}

// TestReuseAfterCopyIn: a session that ran COPY FROM STDIN to its end and left idle
// is parked for the next client like any other, on the epoll loop and on the
// kernel relay (whose verdict program follows the copy).
func TestReuseAfterCopyIn(t *testing.T) {
	t.Parallel()
	for _, relay := range []string{"epoll", "kernel"} {
		t.Run(relay, func(t *testing.T) {
			s := startServer(t, newStateDir(t), "--relay", relay)
			s.seedSQL("app", reuseSQL)
			ctx := context.Background()
			c := s.connect(t, "app@copyin")
			pid := c.PgConn().PID()
			n, err := c.CopyFrom(ctx, pgx.Identifier{"t"}, []string{"id", "v"}, pgx.CopyFromRows([][]any{{2000, "copied"}, {2001, "copied"}}))
			if err != nil || n != 2 {
				t.Fatalf("COPY FROM STDIN: %d rows, %v", n, err)
			}
			c.Close(ctx)
			parkedOn(t, s, "copyin", 1)
			next := s.connect(t, "app@copyin")
			if next.PgConn().PID() != pid {
				t.Errorf("next client got pid %d, want the parked session's %d", next.PgConn().PID(), pid)
			}
			if got := scalar[int64](t, next, "SELECT count(*) FROM t WHERE v = 'copied'"); got != 2 {
				t.Errorf("%d copied rows, want 2", got)
			}
		})
	}
}

// TestReusedSessionReportsNow: a reused server session's greeting shows the
// parameters as the session has them now, as a fresh start would: a configuration
// reload it took in during the last client's session, and what the reset restored
// of the last client's SETs.
//
// On the epoll pump: the kernel relay does not see the server's reports (README).
func TestReusedSessionReportsNow(t *testing.T) {
	t.Parallel()
	s := startServer(t, newStateDir(t), "--relay", "epoll")
	s.seedSQL("app", reuseSQL)
	ctx := context.Background()
	first := s.connect(t, "app@reports")
	pid := first.PgConn().PID()
	for _, sql := range []string{"ALTER SYSTEM SET TimeZone = 'Asia/Tokyo'", "SELECT pg_reload_conf()", "SET IntervalStyle = 'iso_8601'"} {
		if _, err := first.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// The backend takes the reload in between two commands, and reports it with
	// the answer of the next.
	eventually(t, 10*time.Second, "the reload reported to the first client", func() bool {
		scalar[int32](t, first, "SELECT 1")
		return first.PgConn().ParameterStatus("TimeZone") == "Asia/Tokyo"
	})
	first.Close(ctx)
	parkedOn(t, s, "reports", 1)

	second := s.connect(t, "app@reports")
	if second.PgConn().PID() != pid {
		t.Fatalf("second client got pid %d, want the parked session's %d", second.PgConn().PID(), pid)
	}
	for name, want := range map[string]string{"TimeZone": "Asia/Tokyo", "IntervalStyle": "postgres"} {
		if got := second.PgConn().ParameterStatus(name); got != want {
			t.Errorf("greeting's %s = %q, want %q", name, got, want)
		}
		if got := scalar[string](t, second, "SELECT current_setting($1)", name); got != want {
			t.Errorf("current_setting(%s) = %q, want %q", name, got, want)
		}
	}
}

// TestParkedSessionsGiveWaySlots: sessions parked under other startup parameters
// hold connection slots of the branch's server, and give them up: clients get
// every slot max_connections gives, as they would without reuse.
func TestParkedSessionsGiveWaySlots(t *testing.T) {
	const slots = 6
	s := startServer(t, newStateDir(t), "--pg-setting", fmt.Sprintf("max_connections=%d", slots),
		"--pg-setting", "superuser_reserved_connections=0")
	s.seedSQL("app", reuseSQL)
	ctx := context.Background()
	for i := range 4 {
		c := s.connect(t, "app@slots", fmt.Sprintf("options='-c work_mem=%dMB'", i+1))
		c.Close(ctx)
		parkedOn(t, s, "slots", i+1)
	}
	for i := range slots {
		c, err := pgx.Connect(ctx, s.dsn("app@slots"))
		if err != nil {
			t.Fatalf("session %d of %d: %v\nserver log:\n%s", i+1, slots, err, s.logs())
		}
		defer c.Close(ctx)
	}
	if n := s.branches()["slots"].IdleServers; n != 0 {
		t.Errorf("%d server sessions still parked, want none", n)
	}
	_, err := pgx.Connect(ctx, s.dsn("app@slots"))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53300" {
		t.Errorf("a session past max_connections: %v, want the server's 53300", err)
	}
}

// TestDatabaseDDLDropsParked: a server session parked on a database does not make
// DROP DATABASE, CREATE DATABASE … TEMPLATE or ALTER DATABASE … RENAME fail with
// 55006 after its client has gone (a test framework's teardown), whether the
// statement comes on a new session or on one open all along; and ALTER DATABASE …
// SET reaches the next client of a database whose sessions were parked.
func TestDatabaseDDLDropsParked(t *testing.T) {
	// The epoll loop reads the statements; the kernel relay does not (README).
	s := startServer(t, newStateDir(t), "--relay", "epoll")
	s.seedSQL("app", reuseSQL)
	ctx := context.Background()
	exec := func(c *pgx.Conn, sql string) {
		t.Helper()
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v\nserver log:\n%s", sql, err, s.logs())
		}
	}
	admin := s.connect(t, "postgres@ddl") // open all along
	exec(admin, "CREATE DATABASE t1")
	use := func(db string) {
		t.Helper()
		c := s.connect(t, db+"@ddl")
		exec(c, "SELECT 1")
		c.Close(ctx)
	}
	use("t1")
	parkedOn(t, s, "ddl", 1)
	exec(admin, "ALTER DATABASE t1 RENAME TO t2")
	use("t2")
	parkedOn(t, s, "ddl", 1)
	exec(admin, "CREATE DATABASE t3 TEMPLATE t2")
	use("t2")
	parkedOn(t, s, "ddl", 1)
	// On a new session, as a test runner's teardown connects.
	c := s.connect(t, "postgres@ddl")
	exec(c, "DROP DATABASE t2")
	c.Close(ctx)

	use("t3")
	use("t3")
	exec(admin, "ALTER DATABASE t3 SET search_path = 'changed'")
	c = s.connect(t, "t3@ddl")
	if got := scalar[string](t, c, "SHOW search_path"); got != "changed" {
		t.Errorf("search_path after ALTER DATABASE … SET: %q, want changed", got)
	}
}

// TestRoleLimitWithParked: a role's connection limit counts the role's parked
// sessions too; a client of the role gets in as it would without reuse, its
// parked session under other parameters ended to make room.
func TestRoleLimitWithParked(t *testing.T) {
	s := startServer(t, newStateDir(t))
	s.seedSQL("app", "CREATE ROLE lim LOGIN CONNECTION LIMIT 1; CREATE TABLE t (i int);")
	ctx := context.Background()
	c := s.connect(t, "app@lim", "user=lim", "options='-c work_mem=3MB'")
	c.Close(ctx)
	parkedOn(t, s, "lim", 1)
	c, err := pgx.Connect(ctx, s.dsn("app@lim", "user=lim"))
	if err != nil {
		t.Fatalf("the role's one client, its parked session under other options: %v\nserver log:\n%s", err, s.logs())
	}
	c.Close(ctx)
}

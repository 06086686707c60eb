package sim

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	brt "github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
)

// standbyHost is the host of the catalog's streaming standby (M10): a host of
// its own, so that the replication link can be cut alone (blackhole routes
// between the two catalog hosts) while nodes and fronts reach both.
const standbyHost = "cat2"

// catalogURL is the catalog's URL for nodes and fronts: both catalog hosts, the
// one that accepts writes taken (target_session_attrs=read-write), so that a
// member finds the promoted standby on its own after a failover.
func catalogURL(hosts ...*host) string {
	var list string
	for i, h := range hosts {
		if i > 0 {
			list += ","
		}
		list += net.JoinHostPort(h.addr.String(), "5432")
	}
	return "postgres://postgres@" + list + "/" + catalogDB + "?sslmode=disable&target_session_attrs=read-write"
}

// startStandby makes a streaming standby of primary on host h, in dir:
// pg_basebackup -R over primary's unix socket, as OS user postgres, then
// primary_conninfo pointed at primary's address on the simulated network (so
// that cutting the link between the two hosts stops the stream) under the
// application name h.name, which synchronous_standby_names can name. It waits
// until primary streams to it. Its cleanup is top's (the cluster's test), since
// it may outlive the scenario as the catalog.
func startStandby(t, top *testing.T, ctx context.Context, primary *catalogServer, h *host, dir string) *catalogServer {
	t.Helper()
	u, err := brt.LookupUser("postgres")
	if err != nil {
		t.Fatal(err)
	}
	s := &catalogServer{host: h, dir: dir, data: filepath.Join(dir, "data"), run: filepath.Join(dir, "run"), proc: primary.proc,
		log: filepath.Join(dir, "catalog.log")}
	os.RemoveAll(dir)
	for _, d := range []string{dir, s.run} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, u.UID, u.GID); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := s.proc.Run(ctx, brt.Job{Version: "15", Prog: "pg_basebackup", Stdout: &out,
		Args: []string{"-h", primary.run, "-U", "postgres", "-D", s.data, "-R", "-X", "stream", "-c", "fast", "--no-sync"}}); err != nil {
		t.Fatalf("pg_basebackup of the catalog: %v\n%s", err, out.String())
	}
	// The last setting in the file wins over the one -R wrote.
	conf, err := os.OpenFile(filepath.Join(s.data, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = fmt.Fprintf(conf, "primary_conninfo = 'host=%s port=5432 user=postgres application_name=%s'\n", primary.host.addr, h.name)
		if cerr := conf.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	s.args = []string{"-D", s.data,
		"-c", "listen_addresses=" + h.addr.String(), "-c", "port=5432", "-c", "unix_socket_directories=" + s.run,
		"-c", "fsync=off", "-c", "shared_buffers=32MB", "-c", "max_connections=300"}
	if err := s.launch(); err != nil {
		t.Fatalf("start the standby: %v", err)
	}
	top.Cleanup(func() { s.stop(top) })
	s.local = "postgres:///postgres?host=" + s.run + "&user=postgres"
	if err := waitPostgres(ctx, s.local, s.exited); err != nil {
		t.Fatalf("the standby did not start: %v\n%s", err, readTail(s.log, 20))
	}
	if s.db, err = sql.Open("pgx", "postgres:///"+catalogDB+"?host="+s.run+"&user=postgres"); err != nil {
		t.Fatal(err)
	}
	s.url = primary.url
	eventually(t, 30*time.Second, "the catalog to stream to "+h.name, func() bool {
		return primary.count(t, "SELECT count(*) FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'", h.name) == 1
	})
	return s
}

// setSync makes the server's commits wait for the standby named (synchronous
// replication), or for none ("": asynchronous), and waits until it streams so.
func (c *catalogServer) setSync(t *testing.T, ctx context.Context, standby string) {
	t.Helper()
	for _, q := range []string{fmt.Sprintf("ALTER SYSTEM SET synchronous_standby_names = '%s'", standby), "SELECT pg_reload_conf()"} {
		if _, err := c.db.ExecContext(ctx, q); err != nil {
			t.Fatalf("catalog: %s: %v", q, err)
		}
	}
	want := "async"
	if standby != "" {
		want = "sync"
	}
	eventually(t, 30*time.Second, "replication to be "+want, func() bool {
		return c.count(t, "SELECT count(*) FROM pg_stat_replication WHERE sync_state = $1", want) == 1
	})
}

// promote promotes the standby (pg_ctl promote, which waits until it accepts
// writes) and waits until the test's pool writes to it.
func (c *catalogServer) promote(t *testing.T, ctx context.Context) {
	t.Helper()
	var out bytes.Buffer
	if err := c.proc.Run(ctx, brt.Job{Version: "15", Prog: "pg_ctl", Stdout: &out,
		Args: []string{"promote", "-D", c.data, "-w", "-t", "60"}}); err != nil {
		t.Fatalf("pg_ctl promote: %v\n%s\n%s", err, out.String(), readTail(c.log, 20))
	}
	eventually(t, 30*time.Second, "the promoted standby to accept writes", func() bool {
		var ro string
		return c.db.QueryRowContext(ctx, "SHOW transaction_read_only").Scan(&ro) == nil && ro == "off"
	})
}

// lsn is the server's current WAL position as a primary (pg_current_wal_lsn)
// or, as a standby, the position it received up to.
func (c *catalogServer) lsn(t *testing.T, ctx context.Context, standby bool) string {
	t.Helper()
	q := "SELECT pg_current_wal_lsn()::text"
	if standby {
		q = "SELECT coalesce(pg_last_wal_receive_lsn()::text, '0/0')"
	}
	var l string
	if err := c.db.QueryRowContext(ctx, q).Scan(&l); err != nil {
		t.Fatalf("catalog: %s: %v", q, err)
	}
	return l
}

package integration

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const shopSQL = `
CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, balance bigint NOT NULL);
INSERT INTO accounts SELECT g, 'owner ' || g, 1000 FROM generate_series(1, 20000) g;
`

// seedChecksum hashes every file's path, mode and content under dir.
func seedChecksum(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	for _, p := range paths {
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, p) // the same for a copy elsewhere
		io.WriteString(h, rel+"\x00"+st.Mode().String()+"\x00")
		if st.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(h, f)
			f.Close()
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func seedDir(s *server, source string) string {
	return filepath.Join(s.state, "seeds", source, "g1", "data")
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// TestSkeleton runs the walking-skeleton behaviours against one server.
func TestSkeleton(t *testing.T) {
	s := startServer(t, newStateDir(t))
	s.seedSQL("shop", shopSQL)
	before := seedChecksum(t, seedDir(s, "shop"))

	t.Run("LazyCreateWithPsql", func(t *testing.T) {
		out, err := s.psql(t, "shop@feature-x", "SELECT count(*) FROM accounts")
		if err != nil || out != "20000" {
			t.Fatalf("psql: %q %v\n%s", out, err, s.logs())
		}
		b, ok := s.branches()["feature-x"]
		if !ok || b.State != "running" || b.Source != "shop" || b.CreateMS <= 0 || b.CowMode != "lazyrw" {
			t.Fatalf("branch after first connect: %+v", b)
		}
		if !strings.Contains(s.logs(), `"branch created"`) && !strings.Contains(s.logs(), "branch created") {
			t.Errorf("creation time not logged")
		}
	})

	t.Run("URLFormsRouteTheSame", func(t *testing.T) {
		host, port, _ := net.SplitHostPort(s.addr)
		for _, url := range []string{
			"postgres://postgres@" + host + ":" + port + "/shop%40url-form?sslmode=disable",
			"postgres://postgres@" + host + ":" + port + "/shop%2540url-form?sslmode=disable", // a literal %40 reaches the proxy
		} {
			c, err := pgx.Connect(context.Background(), url)
			if err != nil {
				t.Fatalf("%s: %v", url, err)
			}
			var db string
			err = c.QueryRow(context.Background(), "SELECT current_database()").Scan(&db)
			c.Close(context.Background())
			if err != nil || db != "shop" {
				t.Errorf("%s: current_database %q, %v", url, db, err)
			}
		}
		if _, ok := s.branches()["url-form"]; !ok {
			t.Errorf("no branch url-form")
		}
	})

	t.Run("DefaultBranch", func(t *testing.T) {
		out, err := s.psql(t, "shop", "SELECT count(*) FROM accounts")
		if err != nil || out != "20000" {
			t.Fatalf("psql shop: %q %v", out, err)
		}
		if _, ok := s.branches()["main"]; !ok {
			t.Errorf("database without @ did not create main")
		}
	})

	t.Run("Isolation", func(t *testing.T) {
		ctx := context.Background()
		a := s.connect(t, "shop@iso-a")
		if _, err := a.Exec(ctx, "UPDATE accounts SET balance = 0 WHERE id <= 100; CREATE TABLE only_in_a (x int)"); err != nil {
			t.Fatal(err)
		}
		b := s.connect(t, "shop@iso-b")
		var sum int64
		if err := b.QueryRow(ctx, "SELECT sum(balance) FROM accounts").Scan(&sum); err != nil || sum != 20000*1000 {
			t.Fatalf("iso-b sees a's writes: sum %d, %v", sum, err)
		}
		var n int
		if err := b.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname = 'only_in_a'").Scan(&n); err != nil || n != 0 {
			t.Errorf("iso-b sees a's table: %d, %v", n, err)
		}
		if err := a.QueryRow(ctx, "SELECT sum(balance) FROM accounts").Scan(&sum); err != nil || sum != (20000-100)*1000 {
			t.Fatalf("iso-a lost its writes: %d %v", sum, err)
		}
		if _, err := a.Exec(ctx, "CHECKPOINT"); err != nil {
			t.Fatal(err)
		}
		if after := seedChecksum(t, seedDir(s, "shop")); after != before {
			t.Fatalf("seed changed under branch writes")
		}
	})

	t.Run("RaceForOneNewBranch", func(t *testing.T) {
		const n = 20
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				c, err := pgx.Connect(ctx, s.dsn("shop@race"))
				if err != nil {
					errs <- err
					return
				}
				defer c.Close(ctx)
				var got int
				if err := c.QueryRow(ctx, "SELECT count(*) FROM accounts").Scan(&got); err != nil || got != 20000 {
					errs <- errors.Join(err, errors.New("wrong count"))
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("racing client: %v", err)
		}
		if got := strings.Count(s.logs(), `"branch": "race", "took"`); got != 1 {
			t.Errorf("%d creations of race logged, want 1\n%s", got, s.logs())
		}
		out := s.mustCLI("branch", "ls")
		if strings.Count(out, " race ") != 1 {
			t.Errorf("branch ls:\n%s", out)
		}
	})

	t.Run("BadInputRefusedOthersUnaffected", func(t *testing.T) {
		ctx := context.Background()
		good := s.connect(t, "shop@steady")
		check := func(step string) {
			var one int
			if err := good.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
				t.Fatalf("after %s the steady session broke: %v", step, err)
			}
		}
		for _, tc := range []struct{ db, code string }{
			{"shop@../x", "3D000"},
			{"shop@Upper", "3D000"},
			{"shop@a/b", "3D000"},
			{"nosuchdb@x", "3D000"},
		} {
			_, err := pgx.Connect(ctx, s.dsn(tc.db))
			if got := pgCode(err); got != tc.code {
				t.Errorf("%s: SQLSTATE %q (%v), want %s", tc.db, got, err, tc.code)
			}
			check(tc.db)
		}
		// Raw garbage, an oversized startup packet, and protocol 2.0.
		raw := func(name string, payload []byte) []byte {
			c, err := net.Dial("tcp", s.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write(payload); err != nil {
				t.Fatalf("%s: write: %v", name, err)
			}
			// The proxy answers (or not) and closes: EOF, or a reset when it closed
			// with bytes of ours unread. A timeout means it kept the connection.
			b, err := io.ReadAll(io.LimitReader(c, 4096))
			if err != nil && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("%s: read: %v", name, err)
			}
			check(name)
			return b
		}
		raw("garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		big := make([]byte, 8)
		binary.BigEndian.PutUint32(big, 100*1024)
		binary.BigEndian.PutUint32(big[4:], 3<<16)
		if resp := raw("100KB startup", big); len(resp) > 0 && !strings.Contains(string(resp), "08P01") {
			t.Errorf("oversized startup answered %q", resp)
		}
		v2 := []byte{0, 0, 0, 0, 0, 2, 0, 0}
		v2 = append(v2, "user\x00postgres\x00database\x00shop\x00\x00"...)
		binary.BigEndian.PutUint32(v2, uint32(len(v2)))
		if resp := raw("protocol 2.0", v2); !strings.Contains(string(resp), "08P01") || !strings.Contains(string(resp), "unsupported frontend protocol") {
			t.Errorf("protocol 2.0 answered %q", resp)
		}
		for _, name := range []string{"../x", "Upper", "a/b"} {
			if _, ok := s.branches()[name]; ok {
				t.Errorf("branch %q was created", name)
			}
		}
	})

	t.Run("CancelThroughProxy", func(t *testing.T) {
		c := s.connect(t, "shop@cancel")
		cancelWhenRunning(t, s.dsn("shop@cancel"), c, "pg_sleep")
		_, err := c.Exec(context.Background(), "SELECT pg_sleep(60)")
		// Only the backend, reached through the proxy's key, answers 57014
		// (query_canceled).
		if pgCode(err) != "57014" {
			t.Fatalf("pg_sleep(60) ended with %v, want SQLSTATE 57014", err)
		}
		c2 := s.connect(t, "shop@cancel")
		var one int
		if err := c2.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
	})

	// The key carries the backend's real PID (so pg_terminate_backend, NOTIFY and
	// pg_stat_activity agree with the client) and a secret of the proxy's own.
	t.Run("CancelKeyHasTheBackendsPID", func(t *testing.T) {
		c := s.connect(t, "shop@cancel")
		var backendPID uint32
		if err := c.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&backendPID); err != nil {
			t.Fatal(err)
		}
		if c.PgConn().PID() != backendPID {
			t.Errorf("client was told pid %d, the backend's is %d", c.PgConn().PID(), backendPID)
		}
		if n := len(c.PgConn().SecretKey()); n != 4 {
			t.Errorf("secret of %d bytes in protocol 3.0, want 4", n)
		}
	})

	t.Run("AdminCreateResetDestroy", func(t *testing.T) {
		s.mustCLI("branch", "create", "admin-made")
		ctx := context.Background()
		c, err := pgx.Connect(ctx, s.dsn("shop@admin-made"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, "DELETE FROM accounts"); err != nil {
			t.Fatal(err)
		}
		c.Close(ctx)
		waitSessions(t, s, "admin-made")
		s.mustCLI("branch", "reset", "admin-made")
		if out, err := s.psql(t, "shop@admin-made", "SELECT count(*) FROM accounts"); err != nil || out != "20000" {
			t.Fatalf("after reset: %q %v", out, err)
		}
		s.mustCLI("branch", "destroy", "admin-made")
		if _, ok := s.branches()["admin-made"]; ok {
			t.Fatal("destroyed branch still listed")
		}
		if _, err := s.cli("branch", "destroy", "admin-made"); err == nil {
			t.Error("destroying a missing branch succeeded")
		}
	})

	if after := seedChecksum(t, seedDir(s, "shop")); after != before {
		t.Fatalf("seed changed")
	}
}

package integration

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

// copyLines generates n lines of COPY text input, 100 bytes each.
type copyLines struct {
	i, n int
	buf  []byte
}

func (r *copyLines) Read(p []byte) (int, error) {
	for len(r.buf) < len(p) && r.i < r.n {
		r.buf = fmt.Appendf(r.buf, "%08d %s\n", r.i, strings.Repeat(string(rune('a'+r.i%26)), 90))
		r.i++
	}
	if len(r.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// slowWriter hashes what it is given, pausing before the first write.
type slowWriter struct {
	pause  time.Duration
	first  func()
	n      int64
	h      interface{ Write([]byte) (int, error) }
	paused bool
}

func (w *slowWriter) Write(p []byte) (int, error) {
	if !w.paused {
		w.paused = true
		if w.first != nil {
			w.first()
		}
		time.Sleep(w.pause)
	}
	w.n += int64(len(p))
	return w.h.Write(p)
}

func kernelMetric(t *testing.T, s *server, name string) float64 {
	return metricValue(t, s.metrics(t), name)
}

// The kernel relay end to end: bulk copies both ways, a paused client, a flood,
// a server terminated mid-stream, a client killed mid-stream, 200 sessions at
// once; the maps are empty after each.
func TestKernelRelay(t *testing.T) {
	s := startServer(t, newStateDir(t), "--relay", "kernel", "--pg-setting", "max_connections=250",
		"--client-write-timeout", "30s")
	s.seedSQL("app", lifecycleSQL)
	ctx := t.Context()
	mapsEmpty := func(t *testing.T) {
		t.Helper()
		eventually(t, 10*time.Second, "kernel relay maps empty", func() bool {
			return kernelMetric(t, s, "pgbranch_proxy_relay_kernel_sockets") == 0
		})
	}
	const rows = 1_000_000 // 100 MB
	in := sha256.New()
	t.Run("copy both ways", func(t *testing.T) {
		c := s.connect(t, "app@bulk")
		defer c.Close(ctx)
		// The splice follows the login's ReadyForQuery: it may finish just after
		// the client has connected.
		eventually(t, 5*time.Second, "the session spliced", func() bool {
			return kernelMetric(t, s, `pgbranch_proxy_relay_sessions_active{relay="kernel"}`) == 1
		})
		if _, err := c.Exec(ctx, "CREATE TABLE big (line text)"); err != nil {
			t.Fatal(err)
		}
		tag, err := c.PgConn().CopyFrom(ctx, io.TeeReader(&copyLines{n: rows}, in), "COPY big FROM STDIN")
		if err != nil || tag.RowsAffected() != rows {
			t.Fatalf("copy in: %v rows, %v", tag.RowsAffected(), err)
		}
		out := &slowWriter{h: sha256.New(), paused: true}
		if _, err := c.PgConn().CopyTo(ctx, out, "COPY big TO STDOUT"); err != nil {
			t.Fatal(err)
		}
		if string(out.h.(interface{ Sum([]byte) []byte }).Sum(nil)) != string(in.Sum(nil)) || out.n != rows*100 {
			t.Fatalf("copy out differs from copy in (%d bytes)", out.n)
		}
	})
	t.Run("paused client", func(t *testing.T) {
		c := s.connect(t, "app@bulk")
		out := &slowWriter{h: sha256.New(), pause: 3 * time.Second}
		if _, err := c.PgConn().CopyTo(ctx, out, "COPY big TO STDOUT"); err != nil {
			t.Fatal(err)
		}
		if string(out.h.(interface{ Sum([]byte) []byte }).Sum(nil)) != string(in.Sum(nil)) {
			t.Fatalf("a client that paused got %d bytes, not the table", out.n)
		}
		c.Close(ctx)
		mapsEmpty(t)
	})
	t.Run("flood", func(t *testing.T) { kernelFlood(t, s) })
	mapsEmpty(t)
	t.Run("terminated mid-stream", func(t *testing.T) {
		c := s.connect(t, "app@bulk")
		admin := s.connect(t, "app@bulk")
		defer admin.Close(ctx)
		var pid int
		c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid)
		out := &slowWriter{h: sha256.New(), first: func() {
			admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
		}}
		_, err := c.PgConn().CopyTo(ctx, out, "COPY big TO STDOUT")
		// A backend blocked writing to its client when it is told to terminate
		// ends without its FATAL (it would block again, and could break the
		// protocol mid-message), as on a direct connection: the client then sees
		// the connection close.
		if code := pgCode(err); code != "57P01" && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("copy under pg_terminate_backend: %v, want 57P01 or the connection closed", err)
		}
		t.Logf("copy under pg_terminate_backend: %v", err)
	})
	t.Run("terminated in a query", func(t *testing.T) {
		c := s.connect(t, "app@bulk")
		admin := s.connect(t, "app@bulk")
		defer admin.Close(ctx)
		var pid int
		c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid)
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(200 * time.Millisecond)
			admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
		}()
		_, err := c.Exec(ctx, "SELECT pg_sleep(30)")
		<-done // admin is used by one goroutine at a time, its deferred Close included
		if pgCode(err) != "57P01" {
			t.Fatalf("query under pg_terminate_backend: %v, want 57P01", err)
		}
	})
	t.Run("client killed mid-stream", func(t *testing.T) {
		psql := exec.Command("psql", "-X", "-q", s.dsn("app@bulk", "application_name=killed"), "-c", "COPY big TO STDOUT")
		psql.Stdout = io.Discard
		if err := psql.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		psql.Process.Kill()
		psql.Wait()
		admin := s.connect(t, "app@bulk")
		defer admin.Close(ctx)
		eventually(t, 35*time.Second, "killed client's backend gone", func() bool {
			var n int
			admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'killed'").Scan(&n)
			return n == 0
		})
	})
	mapsEmpty(t)
	t.Run("200 sessions", func(t *testing.T) { kernel200(t, s) })
	mapsEmpty(t)
}

// kernelFlood pipelines 256 MB of queries at a server busy in pg_sleep: what the
// proxy takes in meanwhile stays bounded, and every query is answered.
func kernelFlood(t *testing.T, s *server) {
	c := s.connect(t, "app@bulk")
	hc, err := c.PgConn().Hijack()
	if err != nil {
		t.Fatal(err)
	}
	conn, fe := hc.Conn, hc.Frontend
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(3 * time.Minute))
	const n, size = 4096, 64 << 10
	query := (&pgproto3.Query{String: "SELECT 1 /*" + strings.Repeat("x", size) + "*/"})
	msg, _ := query.Encode(nil)
	sleep, _ := (&pgproto3.Query{String: "SELECT pg_sleep(3)"}).Encode(nil)
	conn.Write(sleep)
	var sent atomic.Int64
	go func() {
		for range n {
			if _, err := conn.Write(msg); err != nil {
				return
			}
			sent.Add(int64(len(msg)))
		}
	}()
	time.Sleep(2 * time.Second)
	held := sent.Load()
	t.Logf("the client got %d MB into the proxy while the server slept", held>>20)
	if held > 64<<20 {
		t.Errorf("the proxy took %d MB from a client while the server slept: backlog not bounded", held>>20)
	}
	ready := 0
	for ready < n+1 {
		m, err := fe.Receive()
		if err != nil {
			t.Fatalf("after %d answers: %v\n%s", ready, err, s.logs())
		}
		switch m := m.(type) {
		case *pgproto3.ReadyForQuery:
			ready++
		case *pgproto3.ErrorResponse:
			t.Fatalf("error: %s", m.Message)
		}
	}
	term, _ := (&pgproto3.Terminate{}).Encode(nil)
	conn.Write(term)
}

// kernel200 splices 200 sessions at once and closes them in random order, half
// with Terminate, half by dropping the connection.
func kernel200(t *testing.T, s *server) {
	ctx := t.Context()
	conns := make([]*pgx.Conn, 200)
	var wg sync.WaitGroup
	errs := make(chan error, len(conns))
	for i := range conns {
		wg.Go(func() {
			c, err := pgx.Connect(ctx, s.dsn("app@many"))
			if err != nil {
				errs <- err
				return
			}
			conns[i] = c
			var one int
			if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if v := kernelMetric(t, s, `pgbranch_proxy_relay_sessions_active{relay="kernel"}`); v != 200 {
		t.Fatalf("kernel relay carries %v sessions, want 200", v)
	}
	if v := kernelMetric(t, s, "pgbranch_proxy_relay_kernel_sockets"); v < 400 {
		t.Fatalf("%v sockets in the maps, want 400 and the odd injector", v)
	}
	for _, i := range rand.Perm(len(conns)) {
		if i%2 == 0 {
			conns[i].Close(ctx)
			continue
		}
		if hc, err := conns[i].PgConn().Hijack(); err == nil {
			hc.Conn.Close()
		}
	}
}

// Without the kernel relay (programs refused) sessions go to the epoll pump, and
// the proxy says why; --relay kernel then refuses to start.
func TestKernelRelayFallback(t *testing.T) {
	s := startServer(t, newStateDir(t), "--relay", "auto", "--relay-simulate-load-failure")
	s.seedSQL("app", lifecycleSQL)
	c := s.connect(t, "app@fb")
	var one int
	if err := c.QueryRow(t.Context(), "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	m := s.metrics(t)
	if metricValue(t, m, `pgbranch_proxy_relay_sessions_active{relay="epoll"}`) != 1 ||
		metricValue(t, m, `pgbranch_proxy_relay_fallbacks_total{reason="programs_not_loaded"}`) != 1 ||
		metricValue(t, m, "pgbranch_proxy_relay_kernel_loaded") != 0 {
		t.Fatalf("relay metrics:\n%s", grepLines(m, "relay"))
	}
	info := s.mustCLI("info")
	if !strings.Contains(info, `"kernel_loaded": false`) || !strings.Contains(info, `"programs_not_loaded": 1`) {
		t.Fatalf("info does not say why sessions fell back:\n%s", info)
	}
	c.Close(t.Context())

	out, err := exec.Command(binPath, "--state-dir", newStateDir(t), "serve", "--listen", freeAddr(t), "--auth", "trust",
		"--relay", "kernel", "--relay-simulate-load-failure").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(string(out), "--relay kernel") {
		t.Fatalf("--relay kernel without the programs: %v\n%s", err, out)
	}
}

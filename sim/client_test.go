package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// connect opens a session on db (e.g. app@feature) through front f, from the
// client host, as a client behind a TCP load balancer that picked f would.
func (c *cluster) connect(ctx context.Context, f *member, db string) (*pgx.Conn, error) {
	return c.connectWith(ctx, f, db, "")
}

// connectWith is connect with the startup parameter options (such as
// "-c pgbranch.ephemeral=on"), unless it is "".
func (c *cluster) connectWith(ctx context.Context, f *member, db, options string) (*pgx.Conn, error) {
	return c.connectNotices(ctx, f, db, options, nil)
}

// connectNotices is connectWith that passes every NOTICE the session gets,
// from its startup on, to onNotice (unless it is nil).
func (c *cluster) connectNotices(ctx context.Context, f *member, db, options string, onNotice func(string)) (*pgx.Conn, error) {
	host, port, _ := net.SplitHostPort(f.addr)
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s user=postgres dbname=%s sslmode=disable", host, port, db))
	if err != nil {
		return nil, err
	}
	if options != "" {
		cfg.RuntimeParams["options"] = options
	}
	cfg.DialFunc = f.dialer
	if onNotice != nil {
		cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { onNotice(n.Message) }
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// readWith is read with the startup parameter options; it also returns the
// NOTICEs the session got.
func (c *cluster) readWith(ctx context.Context, f *member, branch, options string) (string, []string, error) {
	var (
		mu      sync.Mutex
		notices []string
	)
	conn, err := c.connectNotices(ctx, f, "app@"+branch, options, func(m string) {
		mu.Lock()
		notices = append(notices, m)
		mu.Unlock()
	})
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(context.Background())
	var v string
	err = conn.QueryRow(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v)
	mu.Lock()
	defer mu.Unlock()
	return v, notices, err
}

// message is the message of a server error, or the error's text.
func message(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Message
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// read connects to branch of app through f, reads row 1's v and hangs up.
func (c *cluster) read(ctx context.Context, f *member, branch string) (string, error) {
	conn, err := c.connect(ctx, f, "app@"+branch)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var v string
	err = conn.QueryRow(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v)
	return v, err
}

// write sets row 1's v on branch through f (creating the branch if it is new).
func (c *cluster) write(ctx context.Context, f *member, branch, v string) error {
	conn, err := c.connect(ctx, f, "app@"+branch)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "UPDATE t SET v = $1 WHERE id = 1", v)
	return err
}

// sqlstate is the SQLSTATE of a server error, or "" for any other error.
func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// attempt is one connect-and-read of a probe.
type attempt struct {
	at   time.Time // when it started
	took time.Duration
	err  error
}

func (a attempt) code() string {
	if a.err == nil {
		return "ok"
	}
	if s := sqlstate(a.err); s != "" {
		return s
	}
	return "no SQLSTATE"
}

// probe is a client that connects to one branch through one front again and
// again, 100 ms apart, each attempt bounded by 30 s, and records every outcome.
type probe struct {
	front  *member
	branch string
	stopc  chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	tries  []attempt
}

// startProbe starts a probe of branch through f; want is row 1's v.
func (c *cluster) startProbe(f *member, branch, want string) *probe {
	p := &probe{front: f, branch: branch, stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			v, err := c.read(ctx, f, branch)
			cancel()
			if err == nil && v != want {
				err = fmt.Errorf("read %q, want %q", v, want)
			}
			p.mu.Lock()
			p.tries = append(p.tries, attempt{at: start, took: time.Since(start), err: err})
			p.mu.Unlock()
			select {
			case <-p.stopc:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return p
}

// stop ends the probe, after its attempt in flight.
func (p *probe) stop() {
	select {
	case <-p.stopc:
	default:
		close(p.stopc)
	}
	<-p.done
}

// attempts is what the probe recorded so far.
func (p *probe) attempts() []attempt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]attempt(nil), p.tries...)
}

// first returns the first attempt started at or after since with outcome code
// ("ok" for a success).
func (p *probe) first(since time.Time, code string) (attempt, bool) {
	for _, a := range p.attempts() {
		if !a.at.Before(since) && a.code() == code {
			return a, true
		}
	}
	return attempt{}, false
}

// servedAfter returns the first successful attempt that ended after t.
func (p *probe) servedAfter(t time.Time) (attempt, bool) {
	for _, a := range p.attempts() {
		if a.err == nil && a.at.Add(a.took).After(t) {
			return a, true
		}
	}
	return attempt{}, false
}

// summary counts the outcomes of the attempts started in [from, to) and gives
// the longest one: "57P03 x12, ok x3, longest 15.1s".
func (p *probe) summary(from, to time.Time) string {
	counts := map[string]int{}
	var longest time.Duration
	for _, a := range p.attempts() {
		if a.at.Before(from) || !a.at.Before(to) {
			continue
		}
		counts[a.code()]++
		longest = max(longest, a.took)
	}
	if len(counts) == 0 {
		return "no attempt"
	}
	var parts []string
	for code, n := range counts {
		parts = append(parts, fmt.Sprintf("%s x%d", code, n))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%s, longest %s", strings.Join(parts, ", "), longest.Round(time.Millisecond))
}

// errorsSeen lists the distinct errors of the attempts started in [from, to),
// as SQLSTATE and message, with their counts: "57P03 the branch was on a lost
// node x3".
func (p *probe) errorsSeen(from, to time.Time) string {
	counts := map[string]int{}
	for _, a := range p.attempts() {
		if a.err != nil && !a.at.Before(from) && a.at.Before(to) {
			counts[a.code()+" "+message(a.err)]++
		}
	}
	var parts []string
	for m, n := range counts {
		parts = append(parts, fmt.Sprintf("%s x%d", m, n))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// failures lists the attempts that did not succeed.
func (p *probe) failures() []attempt {
	var out []attempt
	for _, a := range p.attempts() {
		if a.err != nil {
			out = append(out, a)
		}
	}
	return out
}

// percentile is the p-th percentile (0 to 100) of ds, which it sorts.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	i := (len(ds)*p + 99) / 100
	return ds[max(0, min(len(ds)-1, i-1))]
}

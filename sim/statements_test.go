//go:build simmeasure

package sim

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// statementCounter reads pg_stat_statements on the catalog server (the
// extension is created in database postgres; its view covers every database)
// for the cluster's catalog database.
type statementCounter struct {
	ctx context.Context
	db  *sql.DB
}

// statementCounter creates the extension (the server preloads its library)
// and returns a counter; close it after.
func (c *catalogServer) statementCounter(t *testing.T, ctx context.Context) *statementCounter {
	t.Helper()
	db, err := sql.Open("pgx", c.local)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		db.Close()
		t.Fatalf("catalog: %v", err)
	}
	return &statementCounter{ctx: ctx, db: db}
}

func (s *statementCounter) close() { s.db.Close() }

func (s *statementCounter) reset(t *testing.T) {
	t.Helper()
	if _, err := s.db.ExecContext(s.ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		t.Fatalf("catalog: %v", err)
	}
}

// calls is the calls of each statement of the catalog database since the
// last reset, by its normalized text.
func (s *statementCounter) calls(t *testing.T) map[string]int64 {
	t.Helper()
	rows, err := s.db.QueryContext(s.ctx, `SELECT s.query, s.calls FROM pg_stat_statements s
		JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1`, catalogDB)
	if err != nil {
		t.Fatalf("catalog: %v", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var q string
		var n int64
		if err := rows.Scan(&q, &n); err != nil {
			t.Fatal(err)
		}
		out[strings.Join(strings.Fields(q), " ")] += n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// batch runs op n times, spread over at least statementsWindow, and logs the
// statements per operation by kind and by text: the calls counted during the
// batch less those of a window as long with no client right after it.
func (s *statementCounter) batch(t *testing.T, what string, n int, op func(i int) error) {
	t.Helper()
	s.reset(t)
	start := time.Now()
	for i := range n {
		if err := op(i); err != nil {
			t.Fatalf("%s %d: %v", what, i, err)
		}
		if d := time.Until(start.Add(statementsWindow * time.Duration(i+1) / time.Duration(n))); d > 0 {
			time.Sleep(d)
		}
	}
	took := time.Since(start)
	during := s.calls(t)
	s.reset(t)
	time.Sleep(took)
	idle := s.calls(t)

	type stmt struct {
		text  string
		perOp float64
	}
	var stmts []stmt
	kinds := map[string]float64{}
	var total, background float64
	for q, k := range during {
		per := float64(k-idle[q]) / float64(n)
		background += float64(idle[q])
		if per < 0.05 {
			continue
		}
		stmts = append(stmts, stmt{q, per})
		kinds[statementKind(q)] += per
		total += per
	}
	sort.Slice(stmts, func(i, j int) bool { return stmts[i].perOp > stmts[j].perOp })
	var ks []string
	for k, v := range kinds {
		ks = append(ks, fmt.Sprintf("%s %.2f", k, v))
	}
	sort.Strings(ks)
	t.Logf("M14 catalog statements per %s: %.2f in all (%d operations in %s; %.0f statements in the %s without clients): %s",
		what, total, n, took.Round(time.Millisecond), background, took.Round(time.Millisecond), strings.Join(ks, ", "))
	for _, st := range stmts {
		t.Logf("    %.2f  %s", st.perOp, shorten(st.text, 160))
	}
}

var statementTable = regexp.MustCompile(`(?i)\b(?:from|into|update|join)\s+([a-z_]+)`)

// statementKind is a statement's verb and first table (a name after FROM,
// INTO, UPDATE or JOIN that is not a function call): "SELECT branches",
// "UPDATE nodes", "BEGIN".
func statementKind(q string) string {
	f := strings.Fields(q)
	if len(f) == 0 {
		return "?"
	}
	verb := strings.ToUpper(f[0])
	for _, m := range statementTable.FindAllStringSubmatchIndex(q, -1) {
		if rest := strings.TrimSpace(q[m[1]:]); !strings.HasPrefix(rest, "(") { // not "from now()"
			return verb + " " + strings.ToLower(q[m[2]:m[3]])
		}
	}
	return verb
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

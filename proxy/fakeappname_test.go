package proxy_test

import (
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgproto3"
)

// appNameGUC is the fake server's application_name, kept as Postgres 15 keeps it:
// the value it takes for a name is pgAppName's, DISCARD ALL returns it to the
// start-up value, and a change is reported before the next ReadyForQuery.
type appNameGUC struct {
	start, now, reported string
	sent                 bool
}

func newAppNameGUC(startup string) *appNameGUC {
	v := pgAppName(startup)
	return &appNameGUC{start: v, now: v}
}

// exec applies a query the proxy sends: SET application_name, or DISCARD ALL.
func (g *appNameGUC) exec(q string) {
	switch {
	case q == "DISCARD ALL":
		g.now = g.start
	case strings.HasPrefix(q, "SET application_name = "):
		lit := strings.TrimPrefix(q, "SET application_name = ")
		if strings.HasPrefix(lit, "E") {
			lit = strings.ReplaceAll(lit[1:], `\\`, `\`)
		}
		g.now = pgAppName(strings.ReplaceAll(strings.Trim(lit, "'"), "''", "'"))
	}
}

// report sends the value when it is not the one last reported.
func (g *appNameGUC) report(be *pgproto3.Backend) {
	if g.sent && g.now == g.reported {
		return
	}
	be.Send(&pgproto3.ParameterStatus{Name: "application_name", Value: g.now})
	g.reported, g.sent = g.now, true
}

// pgAppName is the application_name Postgres 15 takes for v: cut to 63 bytes
// (NAMEDATALEN-1) at a character boundary, then every byte that is not printable
// ASCII replaced with '?' (pg_clean_ascii).
func pgAppName(v string) string {
	if len(v) > 63 {
		n := 63
		for n > 0 && !utf8.RuneStart(v[n]) {
			n--
		}
		v = v[:n]
	}
	b := []byte(v)
	for i, c := range b {
		if c < 32 || c > 126 {
			b[i] = '?'
		}
	}
	return string(b)
}

package catalog

import (
	"context"
	"database/sql"
	"net/url"
	"strconv"
	"strings"
)

// dialect is what differs between the catalog's backends. Everything else (the
// statements, the scanning, the transactions) is shared.
type dialect interface {
	// name is "sqlite" or "postgres".
	name() string
	// rebind rewrites a statement written with ? placeholders for the backend.
	rebind(query string) string
	// types turns the type tokens of schema.go (<id>, <int>, ...) into column types.
	types() *strings.Replacer
	// forUpdate is appended to a SELECT whose row the transaction then updates.
	forUpdate() string
	// forShare is appended to a SELECT of a row that must not change (nor be
	// locked for update) until the transaction ends.
	forShare() string
	// isUnique reports whether err is a unique or primary key violation.
	isUnique(err error) bool
	// unavailable reports whether err says the database could not be reached.
	unavailable(err error) bool
	// deadConn reports whether err is a pooled connection found dead before
	// anything was sent on it (its server restarted): another connection may work.
	deadConn(err error) bool
	// lockSchema serializes schema creation between processes opening the catalog at once.
	lockSchema(ctx context.Context, tx *sql.Tx) error
	// lockSeeds serializes the numbering of a source's seed generations.
	lockSeeds(ctx context.Context, tx *sql.Tx, source string) error
	// lockSource locks a source against removal (shared, by a new branch) or
	// takes it for its removal (exclusive), until the transaction ends.
	lockSource(ctx context.Context, tx *sql.Tx, source string, exclusive bool) error
	// nowNanos is an SQL expression for the catalog's clock in unix nanoseconds:
	// leases are measured by it only, never by a node's clock.
	nowNanos() string
	// skipLocked is appended to a SELECT of rows a sweep updates, so that sweeps
	// running at once take different rows instead of waiting on each other.
	skipLocked() string
	// lockNodes serializes registrations, which number the nodes' slots.
	lockNodes(ctx context.Context, tx *sql.Tx) error
	// columns returns the columns of table, by name, with their declared types.
	columns(ctx context.Context, tx *sql.Tx, table string) (map[string]string, error)
	// snapshot is how a transaction that reads every table at one instant begins.
	snapshot() *sql.TxOptions
	// afterCopy makes a table's id sequence continue after the ids copied into it.
	afterCopy(ctx context.Context, tx *sql.Tx, table string) error
}

// dollarPlaceholders rewrites ? as $1, $2, ... outside quoted strings and identifiers.
func dollarPlaceholders(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(query); i++ {
		ch := query[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(ch)
	}
	return b.String()
}

// Redact returns dsn with any password replaced, for logs and error messages.
func Redact(dsn string) string {
	if !strings.Contains(dsn, "://") {
		return dsn // a file path
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "(a URL that does not parse)"
	}
	q := u.Query()
	for k := range q {
		if lk := strings.ToLower(k); lk == "password" || lk == "sslpassword" {
			q.Set(k, "xxxxx")
		}
	}
	u.RawQuery = q.Encode()
	return u.Redacted()
}

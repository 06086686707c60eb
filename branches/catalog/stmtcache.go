package catalog

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps the SQLite catalog's statements prepared. Its driver parses a
// statement's text at every call otherwise, and parsing was half of a claim's
// catalog time. The database has one connection (openSQLite), so a statement
// cannot be prepared on it while a transaction holds that connection: one that
// first runs inside a transaction is prepared once the transaction has ended,
// and transactions use prepared statements through Tx.StmtContext, which finds
// them prepared on that same connection. Postgres goes without: pgx caches its
// statements per connection itself. Safe for concurrent use; a nil cache
// prepares nothing.
type stmtCache struct {
	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	wanted map[string]bool // ran in a transaction, not prepared yet
	closed bool
}

func newStmtCache() *stmtCache {
	return &stmtCache{stmts: map[string]*sql.Stmt{}, wanted: map[string]bool{}}
}

// maxCachedStmts bounds the cache: the catalog's statements are a fixed set of
// texts (a few vary with a fence condition), so more would be a leak.
const maxCachedStmts = 512

// inTx returns the prepared statement for query, or nil after noting it to be
// prepared once the transaction has ended.
func (s *stmtCache) inTx(query string) *sql.Stmt {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.stmts[query]; st != nil {
		return st
	}
	if len(s.stmts)+len(s.wanted) < maxCachedStmts {
		s.wanted[query] = true
	}
	return nil
}

// outside returns the prepared statement for query, preparing it on db (no
// transaction of the caller's holds the connection); nil when it is not cached.
func (s *stmtCache) outside(ctx context.Context, db *sql.DB, query string) *sql.Stmt {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	st := s.stmts[query]
	full := len(s.stmts) >= maxCachedStmts
	s.mu.Unlock()
	if st != nil || full {
		return st
	}
	return s.prepare(ctx, db, query)
}

// prepareWanted prepares what transactions ran, once the connection is free.
func (s *stmtCache) prepareWanted(ctx context.Context, db *sql.DB) {
	if s == nil {
		return
	}
	s.mu.Lock()
	var todo []string
	for q := range s.wanted {
		todo = append(todo, q)
	}
	clear(s.wanted)
	s.mu.Unlock()
	for _, q := range todo {
		s.prepare(ctx, db, q)
	}
}

// prepare prepares query on db and keeps it; nil when the prepare failed (the
// statement then runs unprepared, and reports its own error).
func (s *stmtCache) prepare(ctx context.Context, db *sql.DB, query string) *sql.Stmt {
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.stmts[query]; old != nil || s.closed || len(s.stmts) >= maxCachedStmts {
		st.Close()
		return old
	}
	s.stmts[query] = st
	return st
}

// close closes every prepared statement; none is kept after it.
func (s *stmtCache) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for q, st := range s.stmts {
		st.Close()
		delete(s.stmts, q)
	}
}

package router

import (
	"errors"
	"strconv"
)

// ErrInvalidName is returned when a branch name (or the database part of the
// database parameter) is not acceptable.
var ErrInvalidName = errors.New("invalid name")

// ErrNoBranch is returned when the database parameter names no branch and there is no
// default branch.
var ErrNoBranch = errors.New("no branch given")

// ErrNoDatabase is returned when neither the database nor the user parameter gives a
// database name, or the part before '@' is empty.
var ErrNoDatabase = errors.New("no database given")

// ErrInvalidOption is returned for an unknown pgbranch.* option or an invalid value.
var ErrInvalidOption = errors.New("invalid option")

// ErrUnknownSource is returned when pgbranch.source names a source that does not exist.
var ErrUnknownSource = errors.New("unknown source")

// ErrAmbiguousSource is returned when several sources have the database and none was chosen.
var ErrAmbiguousSource = errors.New("ambiguous source")

// ErrUnknownDatabase is returned when none of several sources has the database.
var ErrUnknownDatabase = errors.New("unknown database")

// ErrUnknownBranch is returned when pgbranch.from names a branch the source does not have.
var ErrUnknownBranch = errors.New("unknown branch")

// ErrNoSources is returned by ResolveSource when there are no sources at all.
var ErrNoSources = errors.New("no sources")

// NamesSources reports whether err, from ResolveSource, tells which sources there
// are or which databases they have (an unknown source, a database in several
// sources or in none): what Postgres tells no one before they have logged in.
func NamesSources(err error) bool {
	return errors.Is(err, ErrUnknownSource) || errors.Is(err, ErrAmbiguousSource) || errors.Is(err, ErrUnknownDatabase)
}

// Error is a routing error to report to the client. Err is one of the Err* sentinels
// (use errors.Is); Message and Hint are client-facing, lowercase in the Postgres style,
// bounded in length, and quote client input with Go quoting. The zero value has no
// meaning; Parse and ResolveSource return *Error.
type Error struct {
	Err     error  // the sentinel, for errors.Is
	Message string // the primary message, e.g. `invalid branch name "Foo"`
	Hint    string // what the client can do about it; may be empty
}

// Error returns the client-facing message.
func (e *Error) Error() string {
	if e.Message == "" && e.Err != nil {
		return e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// maxQuoted is how many bytes of client input an error message quotes.
const maxQuoted = 64

// quote quotes client input for an error message, truncated to maxQuoted bytes.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:maxQuoted]) + "..."
}

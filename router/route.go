package router

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Option names recognised in the startup "options" parameter (-c key=value) or as
// startup parameters of their own. Names match case-insensitively, as Postgres GUC
// names do; values are case-sensitive except for booleans.
const (
	// OptSource picks the source by name.
	OptSource = "pgbranch.source"
	// OptFrom names the parent branch, used only when the branch is created.
	OptFrom = "pgbranch.from"
	// OptTTL is the branch's time to live.
	OptTTL = "pgbranch.ttl"
	// OptEphemeral marks the branch as ephemeral.
	OptEphemeral = "pgbranch.ephemeral"
	// OptReset resets the branch to its base before this session.
	OptReset = "pgbranch.reset"
	// OptQuota caps the bytes the branch owns, set when the branch is created.
	OptQuota = "pgbranch.quota"
)

// optPrefix is the prefix that marks a setting as ours, in lowercase.
const optPrefix = "pgbranch."

// knownOptions lists the option names for hints, sorted.
const knownOptions = OptEphemeral + ", " + OptFrom + ", " + OptQuota + ", " + OptReset + ", " + OptSource + ", " + OptTTL

// Options are the pgbranch.* settings a client asked for. The zero value means none
// were given.
type Options struct {
	Source    string        // pgbranch.source; "" if unset
	From      string        // pgbranch.from, a valid branch name; "" if unset
	TTL       time.Duration // pgbranch.ttl; 0 if unset, never negative
	Ephemeral bool          // pgbranch.ephemeral
	Reset     bool          // pgbranch.reset
	Quota     int64         // pgbranch.quota in bytes; 0 if unset
}

// Route is where one client connection goes. It is produced by Parse; the zero value
// is not a valid route. Params belongs to the Route: Parse never shares it with its
// input.
type Route struct {
	Database string  // the database inside the branch's cluster, never ""
	Branch   string  // a name that passes ValidBranchName
	Options  Options // the pgbranch.* settings
	// Params are the startup parameters to send to the backend: a copy of the input with
	// "database" set to Database, pgbranch.* parameters removed, and "options" rewritten
	// without the pgbranch.* settings (the key is removed entirely if nothing remains).
	Params map[string]string
}

// Parse decides the route of a connection from its startup parameters.
//
// It takes the database from params["database"], or from params["user"] when that is
// empty or absent (as Postgres does), and splits it on the last '@' into database and
// branch; when there is no '@', the last literal "%40" counts as one. A database without
// a branch routes to defaultBranch, or fails with ErrNoBranch if defaultBranch is "".
// The branch must pass ValidBranchName (else ErrInvalidName).
//
// pgbranch.* settings are taken from params["options"] (in Postgres's syntax: -c
// name=value, -cname=value or --name=value, with backslash escapes) and then from
// startup parameters named pgbranch.*, which win, as they do in Postgres; a setting
// given twice keeps the last value. Unknown pgbranch.* names and bad values give
// ErrInvalidOption, and so does "pgbranch." anywhere else in options, so that no
// pgbranch setting can reach Postgres in a form Parse did not recognise.
//
// Parse does not modify params and does no I/O. Errors are *Error.
func Parse(params map[string]string, defaultBranch string) (Route, error) {
	db, branch, err := splitDatabase(params, defaultBranch)
	if err != nil {
		return Route{}, err
	}
	if !ValidBranchName(branch) {
		return Route{}, invalidBranch(branch)
	}

	var opts Options
	optsText, hasOpts := params["options"]
	var settings []setting
	if hasOpts {
		settings, optsText, err = stripOptions(optsText)
		if err != nil {
			return Route{}, err
		}
	}
	// Startup parameters are applied after options, as in Postgres, in a fixed order.
	var keys []string
	for k := range params {
		if hasOptPrefix(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		settings = append(settings, setting{name: k, key: asciiLower(k), value: params[k], hasValue: true})
	}
	for _, s := range settings {
		if err := opts.apply(s); err != nil {
			return Route{}, err
		}
	}

	out := make(map[string]string, len(params)+1)
	for k, v := range params {
		if !hasOptPrefix(k) {
			out[k] = v
		}
	}
	out["database"] = db
	if hasOpts {
		if optsText == "" {
			delete(out, "options")
		} else {
			out["options"] = optsText
		}
	}
	return Route{Database: db, Branch: branch, Options: opts, Params: out}, nil
}

// splitDatabase finds the database and branch names in params.
func splitDatabase(params map[string]string, defaultBranch string) (db, branch string, err error) {
	full := params["database"]
	if full == "" {
		full = params["user"]
	}
	if full == "" {
		return "", "", &Error{
			Err:     ErrNoDatabase,
			Message: "no database name given",
			Hint:    `connect to a database named "DATABASE@BRANCH"`,
		}
	}
	hasBranch := false
	if i := strings.LastIndexByte(full, '@'); i >= 0 {
		db, branch, hasBranch = full[:i], full[i+1:], true
	} else if i := strings.LastIndex(full, "%40"); i >= 0 {
		db, branch, hasBranch = full[:i], full[i+len("%40"):], true
	} else {
		db = full
	}
	if db == "" {
		return "", "", &Error{
			Err:     ErrNoDatabase,
			Message: "empty database name in " + quote(full),
			Hint:    `connect to a database named "DATABASE@BRANCH"`,
		}
	}
	if strings.IndexByte(db, 0) >= 0 {
		return "", "", &Error{
			Err:     ErrInvalidName,
			Message: "invalid database name " + quote(db),
			Hint:    "database names cannot contain NUL bytes",
		}
	}
	if !hasBranch {
		if defaultBranch == "" {
			return "", "", &Error{
				Err:     ErrNoBranch,
				Message: "no branch given for database " + quote(db),
				Hint:    "connect to a database named " + quote(db+"@BRANCH"),
			}
		}
		branch = defaultBranch
	}
	return db, branch, nil
}

// hasOptPrefix reports whether name starts with "pgbranch.", ignoring ASCII case
// (Postgres folds GUC names in ASCII only).
func hasOptPrefix(name string) bool {
	return len(name) >= len(optPrefix) && asciiLower(name[:len(optPrefix)]) == optPrefix
}

// asciiLower lowercases the ASCII letters of s and leaves every other byte alone.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// Params returns the options that are set as pgbranch.* startup parameters, which
// Parse reads back to the same Options: how a front passes a route on to a node.
func (o Options) Params() map[string]string {
	p := map[string]string{}
	if o.Source != "" {
		p[OptSource] = o.Source
	}
	if o.From != "" {
		p[OptFrom] = o.From
	}
	if o.TTL > 0 {
		p[OptTTL] = o.TTL.String()
	}
	if o.Ephemeral {
		p[OptEphemeral] = "on"
	}
	if o.Reset {
		p[OptReset] = "on"
	}
	if o.Quota > 0 {
		p[OptQuota] = strconv.FormatInt(o.Quota, 10)
	}
	return p
}

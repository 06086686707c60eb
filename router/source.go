package router

import (
	"slices"
	"strings"
)

// Source is what the router knows about one source: its name and the databases its
// cluster has, and what settles a database that several sources have. The zero
// value is a source with no name and no databases.
type Source struct {
	Name      string   // the source's name, as pgbranch.source gives it
	Databases []string // the databases in the source's cluster
	HasBranch bool     // a branch of the route's name exists in it
	HasParent bool     // the branch the route's pgbranch.from names exists in it
	Derived   bool     // seeded from another source's branch (source add --from-branch)
}

// ResolveSource picks the source for route r and returns its name:
//
//   - r.Options.Source if set, which must be one of sources (else ErrUnknownSource);
//   - else the one source whose Databases contain r.Database;
//   - else, of several that have it, the one with a branch of the route's name
//     (a connection string handed out before another source with the database was
//     added keeps working); if none has one, the one with the parent the route's
//     pgbranch.from names (a fork goes to its parent's source); else the one not
//     Derived from another's branch (a template of migrations takes no new branch
//     by its database alone);
//   - else the only source, if there is exactly one (its Postgres then reports a
//     missing database itself);
//   - else ErrAmbiguousSource when several sources have the database, or
//     ErrUnknownDatabase when none has it.
//
// With no sources at all it returns ErrNoSources. Errors are *Error whose Hint lists
// the candidate source names, sorted.
func ResolveSource(r Route, sources []Source) (string, error) {
	if len(sources) == 0 {
		return "", &Error{
			Err:     ErrNoSources,
			Message: "no sources are configured",
			Hint:    "add a source to pgbranchproxy before connecting",
		}
	}
	if r.Options.Source != "" {
		for _, s := range sources {
			if s.Name == r.Options.Source {
				return s.Name, nil
			}
		}
		return "", &Error{
			Err:     ErrUnknownSource,
			Message: "source " + quote(r.Options.Source) + " does not exist",
			Hint:    "known sources: " + sourceNames(sources),
		}
	}
	var having []Source
	for _, s := range sources {
		if slices.Contains(s.Databases, r.Database) {
			having = append(having, s)
		}
	}
	pick := having
	if len(pick) > 1 {
		if with := filter(pick, func(s Source) bool { return s.HasBranch }); len(with) > 0 {
			pick = with
		} else if parent := filter(pick, func(s Source) bool { return s.HasParent }); r.Options.From != "" && len(parent) > 0 {
			pick = parent
		} else if own := filter(pick, func(s Source) bool { return !s.Derived }); len(own) > 0 {
			pick = own
		}
	}
	switch {
	case len(pick) == 1:
		return pick[0].Name, nil
	case len(sources) == 1:
		return sources[0].Name, nil
	case len(having) > 1:
		return "", &Error{
			Err:     ErrAmbiguousSource,
			Message: "database " + quote(r.Database) + " exists in several sources",
			Hint:    "choose one with -c " + OptSource + "=NAME; candidates: " + sourceNames(having),
		}
	default:
		return "", &Error{
			Err:     ErrUnknownDatabase,
			Message: "database " + quote(r.Database) + " does not exist in any source",
			Hint:    "sources: " + sourceNames(sources),
		}
	}
}

// filter returns the sources keep is true for.
func filter(sources []Source, keep func(Source) bool) []Source {
	var out []Source
	for _, s := range sources {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

// sourceNames lists the names of sources, sorted, without duplicates, quoted.
func sourceNames(sources []Source) string {
	names := make([]string, 0, len(sources))
	for _, s := range sources {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for i, n := range names {
		names[i] = quote(n)
	}
	return strings.Join(names, ", ")
}

package seed

import (
	"slices"
	"strings"

	"github.com/pgbranchproxy/pgbranchproxy/branches/dbdiff"
)

// dbLocaleOptions are the options of pg_dump's CREATE DATABASE that say how the
// database's text is encoded and compared; the rest (TEMPLATE, OWNER, a
// tablespace, the OID) are not the restored database's to copy.
var dbLocaleOptions = []string{"ENCODING", "LOCALE_PROVIDER", "LOCALE", "LC_COLLATE", "LC_CTYPE",
	"ICU_LOCALE", "ICU_RULES", "BUILTIN_LOCALE"}

// libcLocaleOptions are those of dbLocaleOptions that name a libc locale, which
// an ICU (or builtin) database has too, for the operating system's functions.
var libcLocaleOptions = []string{"LOCALE", "LC_COLLATE", "LC_CTYPE"}

// dbOption is one option of a CREATE DATABASE, its key upper case.
type dbOption struct{ key, value string }

// databaseLocales returns the WITH clauses (from template0, which any of them
// needs) to create the archive's database with, in the order to try them, or none
// when the CREATE DATABASE that a schema script (pg_restore -s -C) begins with
// has no encoding or locale option: first as it was, `TEMPLATE template0 ENCODING
// 'UTF8' LOCALE_PROVIDER 'icu' LOCALE 'en_US.UTF-8' ICU_LOCALE 'en-US'`; then,
// for a UTF8 database whose collation is not libc's, the same with LOCALE
// 'C.UTF-8' for its libc locale, which a dump from a host with en_US.UTF-8 names
// and this host may lack: its text still sorts by ICU. Values are quoted again,
// not copied.
func databaseLocales(script []byte) ([]string, error) {
	opts, err := databaseOptions(script)
	if err != nil || len(opts) == 0 {
		return nil, err
	}
	clauses := []string{localeClause(opts)}
	provider, encoding := optionOf(opts, "LOCALE_PROVIDER"), optionOf(opts, "ENCODING")
	if provider != "" && !strings.EqualFold(provider, "libc") && (encoding == "" || strings.EqualFold(encoding, "UTF8")) {
		var kept []dbOption
		libc := false
		for _, o := range opts {
			switch {
			case !slices.Contains(libcLocaleOptions, o.key):
				kept = append(kept, o)
			case !libc:
				kept, libc = append(kept, dbOption{"LOCALE", "C.UTF-8"}), true
			}
		}
		if c := localeClause(kept); libc && c != clauses[0] {
			clauses = append(clauses, c)
		}
	}
	return clauses, nil
}

func localeClause(opts []dbOption) string {
	var b strings.Builder
	b.WriteString("TEMPLATE template0")
	for _, o := range opts {
		b.WriteString(" " + o.key + " " + quoteLiteral(o.value))
	}
	return b.String()
}

func optionOf(opts []dbOption, key string) string {
	for _, o := range opts {
		if o.key == key {
			return o.value
		}
	}
	return ""
}

// databaseOptions reads the encoding and locale options of the first CREATE
// DATABASE of a schema script.
func databaseOptions(script []byte) ([]dbOption, error) {
	var opts []dbOption
	seen := false
	err := dbdiff.ScriptLines(script, func(line string) {
		if seen || !strings.HasPrefix(line, "CREATE DATABASE ") {
			return
		}
		seen = true
		name := strings.TrimPrefix(line, "CREATE DATABASE ")
		n := strings.IndexByte(name, ' ')
		if strings.HasPrefix(name, `"`) {
			_, n = quotedText(name, '"')
		}
		if n < 0 || !strings.HasPrefix(name[n:], " WITH ") {
			return
		}
		rest := name[n+len(" WITH "):]
		var found []dbOption
		for rest = strings.TrimSpace(rest); rest != "" && rest != ";"; rest = strings.TrimSpace(rest) {
			key, after, ok := strings.Cut(rest, " = ")
			if !ok || strings.ContainsAny(key, " '\"") {
				return
			}
			value, n := optionValue(after)
			rest = after[n:]
			if i := slices.IndexFunc(dbLocaleOptions, func(o string) bool { return strings.EqualFold(o, key) }); i >= 0 {
				found = append(found, dbOption{dbLocaleOptions[i], value})
			}
		}
		opts = found
	})
	return opts, err
}

// optionValue reads the value s starts with: a string literal or a word.
func optionValue(s string) (string, int) {
	if strings.HasPrefix(s, "'") {
		return quotedText(s, '\'')
	}
	n := strings.IndexAny(s, " ;")
	if n < 0 {
		n = len(s)
	}
	return s[:n], n
}

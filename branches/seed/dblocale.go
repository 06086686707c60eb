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

// databaseLocale reads the encoding and locale options of the CREATE DATABASE
// that a schema script (pg_restore -s -C) begins with, and returns them as the
// WITH clause of a CREATE DATABASE (from template0, which any of them needs),
// or "" when it has none: `TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER
// 'icu' ICU_LOCALE 'en-US'`. Values are quoted again, not copied.
func databaseLocale(script []byte) (string, error) {
	var clause string
	err := dbdiff.ScriptLines(script, func(line string) {
		if clause != "" || !strings.HasPrefix(line, "CREATE DATABASE ") {
			return
		}
		name := strings.TrimPrefix(line, "CREATE DATABASE ")
		n := strings.IndexByte(name, ' ')
		if strings.HasPrefix(name, `"`) {
			_, n = quotedText(name, '"')
		}
		if n < 0 || !strings.HasPrefix(name[n:], " WITH ") {
			return
		}
		opts := name[n+len(" WITH "):]
		var b strings.Builder
		for opts = strings.TrimSpace(opts); opts != "" && opts != ";"; opts = strings.TrimSpace(opts) {
			key, rest, ok := strings.Cut(opts, " = ")
			if !ok || strings.ContainsAny(key, " '\"") {
				return
			}
			value, n := optionValue(rest)
			opts = rest[n:]
			if slices.ContainsFunc(dbLocaleOptions, func(o string) bool { return strings.EqualFold(o, key) }) {
				b.WriteString(" " + strings.ToUpper(key) + " " + quoteLiteral(value))
			}
		}
		if b.Len() > 0 {
			clause = "TEMPLATE template0" + b.String()
		}
	})
	return clause, err
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

package router

import "strings"

// QuoteConnValue quotes a value of a libpq keyword/value connection string when it
// needs it (empty, or holding a space, a quote, a backslash or a line break).
func QuoteConnValue(s string) string {
	if s != "" && !strings.ContainsAny(s, " '\\\t\n") {
		return s
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

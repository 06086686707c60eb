package seed

import (
	"strings"

	"github.com/pgbranchproxy/pgbranchproxy/branches/dbdiff"
)

// scriptRoles lists the roles a schema script (pg_restore -s -C) names as owners,
// grantees and grantors, default privileges', policies' and user mappings' roles: each must exist
// before the archive's owners and privileges can be restored. dbOwner is the owner
// its ALTER DATABASE gives the database. pg_dump writes each of these statements
// on a line of its own; a name is read as Postgres reads it, so "Mary Smith" is one
// role and PUBLIC none.
func scriptRoles(script []byte) (roles []string, dbOwner string, err error) {
	seen := map[string]bool{}
	add := func(names []string) {
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				roles = append(roles, n)
			}
		}
	}
	err = dbdiff.ScriptLines(script, func(line string) {
		t := sqlTokens(line)
		switch {
		case t.keyword(0, "GRANT"):
			add(t.rolesAfter(false, "TO"))
			add(t.rolesAfter(false, "GRANTED", "BY"))
		case t.keyword(0, "REVOKE"):
			add(t.rolesAfter(false, "FROM"))
			add(t.rolesAfter(false, "GRANTED", "BY"))
		case t.keyword(0, "ALTER") && t.keyword(1, "DEFAULT") && t.keyword(2, "PRIVILEGES"):
			add(t.rolesAfter(true, "FOR", "ROLE"))
			add(t.rolesAfter(false, "TO"))
			add(t.rolesAfter(false, "FROM"))
		case t.keyword(0, "ALTER"):
			owner := t.rolesAfter(false, "OWNER", "TO")
			add(owner)
			if t.keyword(1, "DATABASE") && len(owner) == 1 {
				dbOwner = owner[0]
			}
		case t.keyword(0, "CREATE") && t.keyword(1, "POLICY"):
			add(t.rolesAfter(false, "TO"))
		case t.keyword(0, "CREATE") && t.keyword(1, "USER") && t.keyword(2, "MAPPING"):
			add(t.rolesAfter(true, "FOR"))
		}
	})
	return roles, dbOwner, err
}

// A sqlToken is a word, a quoted identifier (quoted set, text unquoted), a string
// literal or one character of punctuation.
type sqlToken struct {
	text   string
	quoted bool // a "quoted identifier"
	depth  int  // parentheses open before it
}

type sqlLine []sqlToken

// sqlTokens splits one line of SQL into tokens. A literal or quoted identifier
// left open at the end of the line ends there.
func sqlTokens(line string) sqlLine {
	var out sqlLine
	depth := 0
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '"' || c == '\'':
			text, n := quotedText(line[i:], c)
			out = append(out, sqlToken{text: text, quoted: c == '"', depth: depth})
			if c == '\'' {
				out[len(out)-1].text = "'" // a literal is never a role
			}
			i += n
		case identChar(c):
			j := i
			for j < len(line) && identChar(line[j]) {
				j++
			}
			out = append(out, sqlToken{text: line[i:j], depth: depth})
			i = j
		default:
			if c == ')' && depth > 0 {
				depth--
			}
			out = append(out, sqlToken{text: string(c), depth: depth})
			if c == '(' {
				depth++
			}
			i++
		}
	}
	return out
}

// quotedText reads the quoted text s starts with (quote q, doubled inside),
// returning it unquoted and the bytes it took.
func quotedText(s string, q byte) (string, int) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != q {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == q {
			b.WriteByte(q)
			i++
			continue
		}
		return b.String(), i + 1
	}
	return b.String(), len(s)
}

func identChar(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// keyword reports whether token i is the unquoted keyword kw.
func (t sqlLine) keyword(i int, kw string) bool {
	return i < len(t) && !t[i].quoted && strings.EqualFold(t[i].text, kw)
}

// rolesAfter reads the list of roles after the last run of the keywords kws
// outside parentheses (the first with first): names separated by commas. PUBLIC
// and the CURRENT_USER-like words name no role of the archive's.
func (t sqlLine) rolesAfter(first bool, kws ...string) []string {
	at := -1
	for i := 0; i+len(kws) <= len(t); i++ {
		if t[i].depth == 0 && t.keywords(i, kws) {
			at = i + len(kws)
			if first {
				break
			}
		}
	}
	if at < 0 {
		return nil
	}
	var roles []string
	for i := at; i < len(t); i += 2 {
		tok := t[i]
		switch {
		case tok.quoted:
			roles = append(roles, tok.text)
		case pseudoRole(tok.text):
		case identStart(tok.text):
			roles = append(roles, strings.ToLower(tok.text))
		default:
			return roles
		}
		if i+1 >= len(t) || t[i+1].text != "," {
			break
		}
	}
	return roles
}

func (t sqlLine) keywords(i int, kws []string) bool {
	for j, kw := range kws {
		if !t.keyword(i+j, kw) {
			return false
		}
	}
	return true
}

// identStart reports whether w, unquoted, is an identifier (a keyword pg_dump
// does not quote, such as cascade, is one where a name may stand), not a number,
// a literal or punctuation.
func identStart(w string) bool {
	c := w[0]
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// pseudoRole reports whether w stands for a role in a list without naming one of
// the archive's (the list goes on after it).
func pseudoRole(w string) bool {
	switch strings.ToUpper(w) {
	case "PUBLIC", "CURRENT_USER", "CURRENT_ROLE", "SESSION_USER":
		return true
	}
	return false
}

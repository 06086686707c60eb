package seed

import (
	"strings"

	"github.com/pgbranchproxy/pgbranchproxy/branches/dbdiff"
)

// scriptRoles lists the roles a schema script (pg_restore -s -C) names as owners,
// grantees, grantors of default privileges and policy roles: each must exist
// before the archive's owners and privileges can be restored. dbOwner is the owner
// its ALTER DATABASE gives the database. pg_dump writes each of these statements
// on a line of its own; a name is read as Postgres reads it, so "Mary Smith" is one
// role and PUBLIC none.
func scriptRoles(script []byte) (roles []string, dbOwner string) {
	seen := map[string]bool{}
	add := func(names []string) {
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				roles = append(roles, n)
			}
		}
	}
	dbdiff.ScriptLines(script, func(line string) {
		t := sqlTokens(line)
		switch {
		case t.keyword(0, "GRANT"):
			add(t.rolesAfter("TO"))
			add(t.rolesAfter("GRANTED", "BY"))
		case t.keyword(0, "REVOKE"):
			add(t.rolesAfter("FROM"))
			add(t.rolesAfter("GRANTED", "BY"))
		case t.keyword(0, "ALTER") && t.keyword(1, "DEFAULT") && t.keyword(2, "PRIVILEGES"):
			add(t.rolesAfter("ROLE"))
			add(t.rolesAfter("TO"))
			add(t.rolesAfter("FROM"))
		case t.keyword(0, "ALTER"):
			owner := t.rolesAfter("OWNER", "TO")
			add(owner)
			if t.keyword(1, "DATABASE") && len(owner) == 1 {
				dbOwner = owner[0]
			}
		case t.keyword(0, "CREATE") && t.keyword(1, "POLICY"):
			add(t.rolesAfter("TO"))
		}
	})
	return roles, dbOwner
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
// outside parentheses: names separated by commas, up to anything else. PUBLIC
// and the CURRENT_USER-like words name no role of the archive's.
func (t sqlLine) rolesAfter(kws ...string) []string {
	at := -1
	for i := 0; i+len(kws) <= len(t); i++ {
		if t[i].depth == 0 && t.keywords(i, kws) {
			at = i + len(kws)
		}
	}
	if at < 0 {
		return nil
	}
	var roles []string
	for i := at; i < len(t); i += 2 {
		tok := t[i]
		if tok.quoted {
			roles = append(roles, tok.text)
		} else if name, ok := unquotedRole(tok.text); ok {
			roles = append(roles, name)
		} else if !pseudoRole(tok.text) {
			break
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

// unquotedRole returns the role an unquoted word names (folded to lower case),
// unless it is a keyword that ends a role list or names no role.
func unquotedRole(w string) (string, bool) {
	if w == "" || w[0] >= '0' && w[0] <= '9' || w == "'" {
		return "", false
	}
	switch strings.ToUpper(w) {
	case "PUBLIC", "CURRENT_USER", "CURRENT_ROLE", "SESSION_USER", "WITH", "GRANTED", "USING", "CASCADE", "RESTRICT", "IN":
		return "", false
	}
	return strings.ToLower(w), true
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

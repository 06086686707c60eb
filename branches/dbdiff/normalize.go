package dbdiff

import (
	"bufio"
	"bytes"
	"strings"
)

// NormalizeVersion is the rules Normalize applies; a snapshot records it
// (Database.Normalized). Version 1, before it was recorded, dropped lines inside
// literals too (see Legacy); version 2 dropped the SET lines that carry the schema
// (see Before3).
const NormalizeVersion = 3

// Normalize strips from pg_dump --schema-only output what differs between two dumps
// of the same schema: comments (the version header, "Name: …; Type: …" lines), SET
// and set_config lines, \restrict and \unrestrict lines (their key is random), and
// runs of blank lines. Equal schemas normalize to equal text. Only pg_dump's own
// lines go: a line inside a quoted literal (a function's body, a comment's text) is
// kept whatever it starts with, so "SET LOCAL work_mem = '1GB'" in a function body
// is compared like any other. The SET lines that say where the next objects live
// stay (see schemaSet): a table moved to another tablespace differs only there.
func Normalize(dump []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(dump))
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	c := newCompactor()
	var lit literals
	for sc.Scan() {
		raw := sc.Text()
		quoted := lit.open()
		lit.scan(raw)
		line := strings.TrimRight(raw, " \t\r")
		switch {
		case quoted:
			c.verbatim(line)
		case !pgDumpLine(line) || schemaSet(line):
			c.line(line)
		}
	}
	return c.String()
}

// schemaSet reports whether line is one of pg_dump's SET lines that belong to the
// schema: the tablespace or table access method of the objects written after it.
func schemaSet(line string) bool {
	return strings.HasPrefix(line, "SET default_tablespace = ") ||
		strings.HasPrefix(line, "SET default_table_access_method = ")
}

// pgDumpLine reports whether line, outside a literal, is one of pg_dump's own:
// a comment, a SET or set_config, a \restrict or \unrestrict.
func pgDumpLine(line string) bool {
	return strings.HasPrefix(line, "--") ||
		strings.HasPrefix(line, "SET ") ||
		strings.HasPrefix(line, "SELECT pg_catalog.set_config(") ||
		strings.HasPrefix(line, `\restrict`) || strings.HasPrefix(line, `\unrestrict`)
}

// compactor collects normalized lines, dropping leading blank lines and all but
// the first of a run of them.
type compactor struct {
	out   strings.Builder
	blank bool // the last line written was blank, or none was
}

func newCompactor() *compactor { return &compactor{blank: true} }

func (c *compactor) line(l string) {
	if l == "" {
		if c.blank {
			return
		}
		c.blank = true
	} else {
		c.blank = false
	}
	c.out.WriteString(l)
	c.out.WriteByte('\n')
}

// verbatim writes l, blank or not: a line inside a literal is the schema's.
func (c *compactor) verbatim(l string) {
	c.blank = false
	c.out.WriteString(l)
	c.out.WriteByte('\n')
}

func (c *compactor) String() string { return strings.TrimRight(c.out.String(), "\n") + "\n" }

// literals follows, line by line, whether a dump is inside a quoted literal: a
// string ('…'), a quoted identifier ("…") or a dollar-quoted body ($tag$…$tag$).
// pg_dump writes strings with standard_conforming_strings on, so a backslash
// escapes nothing.
type literals struct {
	quote byte   // '\'', '"' or '$'; 0 outside a literal
	tag   string // the dollar quote's delimiter, "$tag$"
}

func (l *literals) open() bool { return l.quote != 0 }

// scan follows line, which ends at a newline.
func (l *literals) scan(line string) {
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch l.quote {
		case '\'', '"':
			if c == l.quote {
				l.quote = 0 // a doubled quote closes and opens again
			}
			continue
		case '$':
			if strings.HasPrefix(line[i:], l.tag) {
				i += len(l.tag) - 1
				l.quote, l.tag = 0, ""
			}
			continue
		}
		switch {
		case c == '-' && strings.HasPrefix(line[i:], "--"):
			return // a comment, to the end of the line
		case c == '\'' || c == '"':
			l.quote = c
		case c == '$' && (i == 0 || !identChar(line[i-1])):
			if tag, ok := dollarTag(line[i:]); ok {
				l.quote, l.tag = '$', tag
				i += len(tag) - 1
			}
		}
	}
}

// dollarTag returns the dollar quote that s starts with ("$$", "$body$"), if any.
func dollarTag(s string) (string, bool) {
	for j := 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '$':
			return s[:j+1], true
		case !identChar(c) || j == 1 && c >= '0' && c <= '9':
			return "", false
		}
	}
	return "", false
}

func identChar(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// AsVersion brings text Normalize made to the rules of version (0 and 1: version
// 1), those a snapshot was taken under, so that it compares with that snapshot.
func AsVersion(normalized string, version int) string {
	switch {
	case version >= NormalizeVersion:
		return normalized
	case version <= 1:
		return Legacy(normalized)
	default:
		return Before3(normalized)
	}
}

// Before3 applies version 2's rules to text Normalize made: the schema's SET
// lines go (see schemaSet), so a seed snapshot taken under them is compared with a
// branch's schema brought to the same rules.
func Before3(normalized string) string {
	c := newCompactor()
	var lit literals
	for _, line := range strings.Split(normalized, "\n") {
		quoted := lit.open()
		lit.scan(line)
		switch {
		case quoted:
			c.verbatim(line)
		case !schemaSet(line):
			c.line(line)
		}
	}
	return c.String()
}

// Legacy applies version 1's rules to text Normalize made, which gives what
// version 1 made of the same dump: a seed snapshot taken under it is compared with
// a branch's schema brought to the same rules, not reported as changed wherever a
// function body holds a line that starts with -- or SET.
func Legacy(normalized string) string {
	c := newCompactor()
	for _, line := range strings.Split(normalized, "\n") {
		if !pgDumpLine(line) {
			c.line(line)
		}
	}
	return c.String()
}

// ScriptLines calls fn with each line of a pg_dump script that starts outside a
// quoted literal: pg_dump's own statements and comments, not the lines of a
// function's body or of a comment's text. It fails on a line over 64 MiB.
func ScriptLines(script []byte, fn func(line string)) error {
	sc := bufio.NewScanner(bytes.NewReader(script))
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	var lit literals
	for sc.Scan() {
		line := sc.Text()
		quoted := lit.open()
		lit.scan(line)
		if !quoted {
			fn(line)
		}
	}
	return sc.Err()
}

package router

import "strings"

// setting is one name=value pair given by the client.
type setting struct {
	name     string // as the client wrote it, for messages
	key      string // name folded as Postgres folds GUC names, to match the Opt* constants
	value    string
	hasValue bool // false for "-c name" without '='
}

// argSwitches are the switches that take an argument in the getopt string of Postgres's
// process_postgres_switches ("B:bC:c:D:d:EeFf:h:ijk:lN:nOPp:r:S:sTt:v:W:-:").
const argSwitches = "BCcDdfhkNprStvW-"

// stripOptions reads the startup "options" parameter as Postgres does and removes the
// pgbranch.* settings from it. It returns those settings in order and the options to
// forward: text itself when nothing was removed, else the remaining arguments
// re-escaped.
func stripOptions(text string) ([]setting, string, error) {
	args := splitOptions(text)
	var settings []setting
	kept := make([]string, 0, len(args))
	endOfSwitches := false
next:
	for i := 0; i < len(args); i++ {
		a := args[i]
		if endOfSwitches || len(a) < 2 || a[0] != '-' {
			kept = append(kept, a) // not a switch; Postgres rejects it, so pass it on
			continue
		}
		if a == "--" {
			endOfSwitches = true // getopt stops here
			kept = append(kept, a)
			continue
		}
		// A cluster of switches, such as "-e", "-B", "-ec", "-cname=value" or "--name=value":
		// switches without an argument, then at most one with its argument, which is the rest
		// of this arg or else the next one.
		for j := 1; j < len(a); j++ {
			c := a[j]
			if strings.IndexByte(argSwitches, c) < 0 {
				continue
			}
			var arg string
			fromNext := false
			switch {
			case j+1 < len(a):
				arg = a[j+1:]
			case i+1 < len(args):
				arg, fromNext = args[i+1], true
			default:
				kept = append(kept, a) // missing argument; Postgres rejects it
				continue next
			}
			if c == 'c' || c == '-' {
				// Postgres's ParseLongOption: name up to the first '=', '-' read as '_'.
				name, value, hasValue := strings.Cut(arg, "=")
				key := asciiLower(strings.ReplaceAll(name, "-", "_"))
				if strings.HasPrefix(key, optPrefix) {
					settings = append(settings, setting{name: name, key: key, value: value, hasValue: hasValue})
					if j > 1 {
						kept = append(kept, a[:j]) // the switches before -c
					}
					if fromNext {
						i++
					}
					continue next
				}
			}
			kept = append(kept, a)
			if fromNext {
				kept = append(kept, args[i+1])
				i++
			}
			continue next
		}
		kept = append(kept, a)
	}

	for _, a := range kept {
		if strings.Contains(asciiLower(a), optPrefix) {
			return nil, "", &Error{
				Err:     ErrInvalidOption,
				Message: "unexpected " + quote(optPrefix) + " in options argument " + quote(a),
				Hint:    "give pgbranch settings as -c pgbranch.NAME=VALUE; known options: " + knownOptions,
			}
		}
	}
	if len(settings) == 0 {
		return nil, text, nil
	}
	var b strings.Builder
	for i, a := range kept {
		if i > 0 {
			b.WriteByte(' ')
		}
		writeEscaped(&b, a)
	}
	return settings, b.String(), nil
}

// splitOptions splits the options parameter into arguments as Postgres's pg_split_opts
// does: on unescaped whitespace, with a backslash escaping the next byte. The only empty
// argument pg_split_opts can produce, from a lone trailing backslash, is dropped
// (Postgres would reject the connection for it).
func splitOptions(text string) []string {
	var args []string
	var b strings.Builder
	for i := 0; i < len(text); {
		for i < len(text) && isSpace(text[i]) {
			i++
		}
		if i == len(text) {
			break
		}
		b.Reset()
		escaped := false
		for ; i < len(text); i++ {
			c := text[i]
			if isSpace(c) && !escaped {
				break
			}
			if !escaped && c == '\\' {
				escaped = true
				continue
			}
			escaped = false
			b.WriteByte(c)
		}
		if b.Len() > 0 {
			args = append(args, b.String())
		}
	}
	return args
}

// writeEscaped writes one argument so that splitOptions reads it back unchanged.
func writeEscaped(b *strings.Builder, arg string) {
	for i := 0; i < len(arg); i++ {
		c := arg[i]
		if c == '\\' || isSpace(c) {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
}

// isSpace is C's isspace in the C locale.
func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}

// OptionSetting returns the value the startup "options" parameter, read as
// Postgres reads it, gives the setting name (a GUC name in lowercase, matched as
// Postgres matches it: ASCII case folded, '-' read as '_'), the last one given, and
// whether it gives one. Postgres applies startup parameters after options, so a
// startup parameter of the same name overrides what this returns.
func OptionSetting(text, name string) (string, bool) {
	args := splitOptions(text)
	value, found := "", false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break // getopt stops here
		}
		if len(a) < 2 || a[0] != '-' {
			continue // not a switch; Postgres rejects it
		}
		// A cluster of switches: those without an argument, then at most one
		// with its argument, the rest of this arg or else the next one.
		for j := 1; j < len(a); j++ {
			c := a[j]
			if strings.IndexByte(argSwitches, c) < 0 {
				continue
			}
			var arg string
			switch {
			case j+1 < len(a):
				arg = a[j+1:]
			case i+1 < len(args):
				i++
				arg = args[i]
			default:
				return value, found // missing argument; Postgres rejects it
			}
			if c == 'c' || c == '-' {
				n, v, ok := strings.Cut(arg, "=")
				if ok && asciiLower(strings.ReplaceAll(n, "-", "_")) == name {
					value, found = v, true
				}
			}
			break
		}
	}
	return value, found
}

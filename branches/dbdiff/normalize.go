package dbdiff

import (
	"bufio"
	"bytes"
	"strings"
)

// Normalize strips from pg_dump --schema-only output what differs between two dumps
// of the same schema: comments (the version header, "Name: …; Type: …" lines), SET
// and set_config lines, \restrict and \unrestrict lines (their key is random), and
// runs of blank lines. Equal schemas normalize to equal text.
func Normalize(dump []byte) string {
	var out strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(dump))
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	blank := true // drop leading blank lines
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		switch {
		case strings.HasPrefix(line, "--"),
			strings.HasPrefix(line, "SET "),
			strings.HasPrefix(line, "SELECT pg_catalog.set_config("),
			strings.HasPrefix(line, `\restrict`), strings.HasPrefix(line, `\unrestrict`):
			continue
		case line == "":
			if blank {
				continue
			}
			blank = true
		default:
			blank = false
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	return strings.TrimRight(out.String(), "\n") + "\n"
}

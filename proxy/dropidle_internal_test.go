package proxy

import (
	"strings"
	"testing"
)

func TestDropsIdle(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]bool{
		"DROP DATABASE foo":                           true,
		"  drop   database if exists foo;":            true,
		"/* teardown */ -- one\nDrop\tDatabase foo":   true,
		"CREATE DATABASE t TEMPLATE app":              true,
		"ALTER DATABASE app RENAME TO old":            true,
		"alter database app set search_path = s":      true,
		"ALTER ROLE app SET statement_timeout = '1s'": true,
		"alter user app set work_mem = '8MB'":         true,
		"DROP ROLE app":                               true,
		"drop user if exists app":                     true,
		"DROP TABLE database":                         false,
		"SELECT 'DROP DATABASE x'":                    false,
		"ALTER TABLE t ADD role text":                 false,
		"DROP":                                        false,
		"DROP DATA":                                   false, // may go on past what was seen
		"/* DROP DATABASE x":                          false,
		"":                                            false,
		"CREATE DATABASEX":                            false,
	} {
		if got := dropsIdle([]byte(q)); got != want {
			t.Errorf("dropsIdle(%q) = %v, want %v", q, got, want)
		}
	}
}

// The client's Query or Parse with such a statement calls dropIdle before the
// chunk that completes its first words is forwarded, however it is split.
func TestTrackDropIdle(t *testing.T) {
	t.Parallel()
	query := func(typ byte, body string) []byte {
		b := []byte{typ, 0, 0, 0, 0}
		b = append(b, body...)
		n := len(b) - 1
		b[1], b[2], b[3], b[4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
		return b
	}
	// split cuts b into chunks of at most n bytes.
	split := func(b []byte, n int) (chunks [][]byte) {
		for len(b) > n {
			chunks, b = append(chunks, b[:n]), b[n:]
		}
		return append(chunks, b)
	}
	for _, tc := range []struct {
		name   string
		chunks [][]byte
		want   int
	}{
		{"simple", [][]byte{query('Q', "DROP DATABASE foo\x00")}, 1},
		{"parse", [][]byte{query('P', "s1\x00CREATE DATABASE t TEMPLATE foo\x00\x00\x00")}, 1},
		{"after a select", [][]byte{append(query('Q', "SELECT 1\x00"), query('Q', "drop database foo\x00")...)}, 1},
		{"select", [][]byte{query('Q', "SELECT 1\x00")}, 0},
		// Once more at the ReadyForQuery outside a transaction after it.
		{"committed", [][]byte{query('Q', "ALTER ROLE app SET work_mem = '8MB'\x00")}, 1},
		{"split in a word", split(query('Q', "DROP DATABASE foo\x00"), 9), 1},
		{"split in the header", split(query('Q', "drop database foo\x00"), 3), 1},
		{"header alone", split(query('Q', "drop database foo\x00"), 5), 1},
		{"byte by byte", split(query('P', "s1\x00ALTER ROLE r SET x = 1\x00\x00\x00"), 1), 1},
		{"long", split(query('Q', "/*"+strings.Repeat("x", 200)+"*/ DROP DATABASE foo;"+strings.Repeat(" ", 1000)+"\x00"), 210), 1},
		{"behind a long comment", [][]byte{query('Q', "/*"+strings.Repeat("x", 300)+"*/ DROP DATABASE foo\x00")}, 1},
		{"behind a long comment, split", split(query('Q', "/*"+strings.Repeat("x", 300)+"*/ DROP DATABASE foo\x00"), 100), 0},
		{"split select", split(append(query('Q', "SELECT 'DROP DATABASE x'\x00"), query('Q', "SELECT 1\x00")...), 7), 0},
		{"split after a select", split(append(query('Q', "SELECT 1\x00"), query('Q', "DROP DATABASE x\x00")...), 17), 1},
	} {
		calls := 0
		tr := &sessionTrack{dropIdle: func() { calls++ }}
		for _, c := range tc.chunks {
			if n := tr.fromClient(c); n != len(c) {
				t.Fatalf("%s: forwarded %d of %d", tc.name, n, len(c))
			}
		}
		if calls != tc.want {
			t.Errorf("%s: dropIdle called %d times, want %d", tc.name, calls, tc.want)
		}
	}
}

// After such a statement dropIdle runs again at the first ReadyForQuery outside a
// transaction, its status byte in the same chunk or the next, and only then.
func TestTrackDropIdleAfterCommit(t *testing.T) {
	t.Parallel()
	msg := func(typ byte, body string) []byte {
		n := len(body) + 4
		return append([]byte{typ, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, body...)
	}
	calls := 0
	tr := &sessionTrack{dropIdle: func() { calls++ }}
	tr.fromClient(msg('Q', "BEGIN\x00"))
	tr.fromServer(msg('Z', "T"))
	tr.fromClient(msg('Q', "ALTER ROLE a SET x = 1\x00"))
	tr.fromServer(msg('Z', "T")) // still in the transaction
	if calls != 1 {
		t.Fatalf("dropIdle called %d times before the commit, want 1", calls)
	}
	tr.fromClient(msg('Q', "COMMIT\x00"))
	z := msg('Z', "I")
	tr.fromServer(z[:5])
	tr.fromServer(z[5:])
	tr.fromServer(msg('Z', "I"))
	if calls != 2 {
		t.Errorf("dropIdle called %d times after the commit, want 2", calls)
	}
}

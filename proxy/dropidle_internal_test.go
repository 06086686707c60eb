package proxy

import "testing"

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

// The client's Query or Parse with such a statement calls dropIdle before it is
// forwarded; one whose first words are split across chunks is not seen.
func TestTrackDropIdle(t *testing.T) {
	t.Parallel()
	query := func(typ byte, body string) []byte {
		b := []byte{typ, 0, 0, 0, 0}
		b = append(b, body...)
		n := len(b) - 1
		b[1], b[2], b[3], b[4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
		return b
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
		{"split", func() [][]byte { q := query('Q', "DROP DATABASE foo\x00"); return [][]byte{q[:9], q[9:]} }(), 0},
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

package proxy

import (
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

func enc(t *testing.T, msgs ...pgproto3.Message) []byte {
	t.Helper()
	var b []byte
	for _, m := range msgs {
		var err error
		if b, err = m.Encode(b); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// feed gives b to f in chunks of size n (every split point is tried by the callers).
func feedClient(tr *sessionTrack, b []byte, n int) []byte {
	var out []byte
	for len(b) > 0 {
		k := min(n, len(b))
		fwd := tr.fromClient(b[:k])
		out = append(out, b[:fwd]...)
		b = b[k:]
	}
	return out
}

func feedServer(tr *sessionTrack, b []byte, n int) {
	for len(b) > 0 {
		k := min(n, len(b))
		tr.fromServer(b[:k])
		b = b[k:]
	}
}

func TestSessionTrack(t *testing.T) {
	query := enc(t, &pgproto3.Query{String: "select 1"})
	answer := enc(t, &pgproto3.RowDescription{}, &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}, &pgproto3.ReadyForQuery{TxStatus: 'I'})
	inTx := enc(t, &pgproto3.CommandComplete{CommandTag: []byte("BEGIN")}, &pgproto3.ReadyForQuery{TxStatus: 'T'})
	terminate := enc(t, &pgproto3.Terminate{})
	extended := enc(t, &pgproto3.Parse{Query: "select $1"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})
	unsynced := enc(t, &pgproto3.Parse{Query: "select $1"}, &pgproto3.Bind{}, &pgproto3.Execute{})
	copyStart := enc(t, &pgproto3.CopyInResponse{})
	for _, c := range []struct {
		name           string
		client, server []byte
		idle, term     bool
	}{
		{"nothing", nil, nil, true, false},
		{"terminate only", terminate, nil, true, true},
		{"query answered, terminate", append(append([]byte{}, query...), terminate...), answer, true, true},
		{"extended answered", append(append([]byte{}, extended...), terminate...), answer, true, true},
		{"query unanswered", query, nil, false, false},
		{"query answered, in transaction", append(append([]byte{}, query...), terminate...), inTx, false, true},
		{"pipeline without sync", append(append([]byte{}, unsynced...), terminate...), nil, false, true},
		{"two queries, one answered", append(append([]byte{}, query...), query...), answer, false, false},
		{"mid copy in", append(append([]byte{}, query...), enc(t, &pgproto3.CopyData{Data: []byte("1\n")})...), copyStart, false, false},
		{"copy in by query, done", append(enc(t, &pgproto3.Query{String: "copy t from stdin"}, &pgproto3.CopyData{Data: []byte("1\n")}, &pgproto3.CopyDone{}), terminate...),
			enc(t, &pgproto3.CopyInResponse{}, &pgproto3.CommandComplete{CommandTag: []byte("COPY 1")}, &pgproto3.ReadyForQuery{TxStatus: 'I'}), true, true},
		{"copy in by query, done, its answer to come", enc(t, &pgproto3.Query{String: "copy t from stdin"}, &pgproto3.CopyData{Data: []byte("1\n")}, &pgproto3.CopyDone{}),
			copyStart, false, false},
		{"half a server message", query, answer[:len(answer)-1], false, false},
		// A Sync sent during an extended-protocol copy may or may not have been
		// ignored by the server (not if the copy failed before it read it): such a
		// session is never taken for idle, even when it is.
		{"extended copy in, then idle", append(enc(t, &pgproto3.Parse{Query: "copy t from stdin"}, &pgproto3.Bind{}, &pgproto3.Execute{},
			&pgproto3.Sync{}, &pgproto3.CopyData{Data: []byte("1\n")}, &pgproto3.CopyDone{}, &pgproto3.Sync{}), terminate...),
			enc(t, &pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.CopyInResponse{},
				&pgproto3.CommandComplete{CommandTag: []byte("COPY 1")}, &pgproto3.ReadyForQuery{TxStatus: 'I'}), false, true},
		// The copy fails at once (a view): the server answers both Syncs, and the
		// query sent next is still running.
		{"extended copy failed, then a query unanswered", append(enc(t, &pgproto3.Parse{Query: "copy v from stdin"}, &pgproto3.Bind{}, &pgproto3.Execute{},
			&pgproto3.Sync{}, &pgproto3.CopyData{Data: []byte("1\n")}, &pgproto3.CopyDone{}, &pgproto3.Sync{}), query...),
			enc(t, &pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.CopyInResponse{}, &pgproto3.ErrorResponse{Message: "cannot copy to view"},
				&pgproto3.ReadyForQuery{TxStatus: 'I'}, &pgproto3.ReadyForQuery{TxStatus: 'I'}), false, false},
		// A stray CopyFail after a Parse: the server skips to the next Sync.
		{"copy fail after a parse", append(append(append([]byte{}, query...), enc(t, &pgproto3.Parse{Query: "selec"}, &pgproto3.CopyFail{Message: "x"})...), terminate...),
			answer, false, true},
	} {
		for n := 1; n <= len(c.client)+len(c.server)+1; n++ {
			tr := &sessionTrack{}
			out := feedClient(tr, c.client, n)
			feedServer(tr, c.server, n)
			want := c.idle
			x := len(c.client) - len(terminate)
			split := c.term && x/n != (x+len(terminate)-1)/n
			if split {
				want = false // half the Terminate went out with an earlier chunk
			}
			if tr.idle() != want || tr.terminated != c.term {
				t.Fatalf("%s (chunks of %d): idle %v terminated %v, want %v %v", c.name, n, tr.idle(), tr.terminated, want, c.term)
			}
			if c.term && !split && len(out) != x {
				t.Fatalf("%s (chunks of %d): forwarded %d bytes, want all but the Terminate", c.name, n, len(out))
			}
			if !c.term && len(out) != len(c.client) {
				t.Fatalf("%s: forwarded %d of %d bytes", c.name, len(out), len(c.client))
			}
		}
	}
}

func TestSessionTrackRefusesGarbage(t *testing.T) {
	tr := &sessionTrack{}
	tr.fromClient([]byte{'Q', 0, 0, 0, 1}) // a length below 4
	if tr.idle() {
		t.Fatal("a broken stream looks idle")
	}
}

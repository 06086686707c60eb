package proxy

import (
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// takeInChunks feeds b to r in chunks of n bytes until it is done.
func takeInChunks(r *pumpReset, b []byte, n int) (done, ok bool) {
	for len(b) > 0 {
		k := min(n, len(b))
		if done, ok = r.take(b[:k]); done {
			if k < len(b) {
				ok = false // bytes after the answer came in a later read
			}
			return done, ok
		}
		b = b[k:]
	}
	return false, false
}

// The pump's reset accepts what serverConn.roundTrip accepts, wherever the reads
// split the answer.
func TestPumpResetTake(t *testing.T) {
	t.Parallel()
	discard := enc(t, &pgproto3.CommandComplete{CommandTag: []byte("DISCARD ALL")}, &pgproto3.ReadyForQuery{TxStatus: 'I'})
	set := enc(t, &pgproto3.CommandComplete{CommandTag: []byte("SET")},
		&pgproto3.ParameterStatus{Name: "application_name", Value: "x"}, &pgproto3.ReadyForQuery{TxStatus: 'I'})
	errResp := enc(t, &pgproto3.ErrorResponse{Severity: "ERROR", Code: "25001", Message: "cannot run inside a transaction block"},
		&pgproto3.ReadyForQuery{TxStatus: 'I'})
	inTx := enc(t, &pgproto3.CommandComplete{CommandTag: []byte("DISCARD ALL")}, &pgproto3.ReadyForQuery{TxStatus: 'T'})
	notice := enc(t, &pgproto3.NoticeResponse{Severity: "NOTICE", Code: "00000", Message: "late"})
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		queries  int
		answer   []byte
		done, ok bool
	}{
		{"discard", 1, discard, true, true},
		{"discard and set", 2, cat(discard, set), true, true},
		{"error", 1, errResp, true, false},
		{"error in the second", 2, cat(discard, errResp), true, false},
		{"not idle", 1, inTx, true, false},
		{"more than asked", 1, cat(discard, notice), true, false},
		{"cut short", 2, discard, false, false},
		{"not the protocol", 1, []byte{'C', 0, 0, 0, 1, 'x'}, true, false},
		// Answers that are not the reset's: a query of the last client still
		// running (a row and its tag), or a tag of another command.
		{"a query's answer first", 1, cat(enc(t, &pgproto3.RowDescription{}, &pgproto3.DataRow{Values: [][]byte{[]byte("secret")}},
			&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}, &pgproto3.ReadyForQuery{TxStatus: 'I'})), true, false},
		{"another tag", 1, enc(t, &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}, &pgproto3.ReadyForQuery{TxStatus: 'I'}), true, false},
		{"no tag", 1, enc(t, &pgproto3.ReadyForQuery{TxStatus: 'I'}), true, false},
		{"tags swapped", 2, cat(set, discard), true, false},
		{"a notice in the answer", 1, cat(notice, discard), true, true},
	} {
		for n := 1; n <= len(tc.answer); n++ {
			r := newPumpReset([]string{resetQuery, setAppNameQuery("x")}[:tc.queries], time.Second, nil)
			done, ok := takeInChunks(r, tc.answer, n)
			if done != tc.done || ok != tc.ok {
				t.Errorf("%s in chunks of %d: done %v ok %v, want done %v ok %v", tc.name, n, done, ok, tc.done, tc.ok)
			}
		}
	}
}

// A pumped session that its client leaves idle is reset by the pump: the server
// gets the reset's queries, and its socket comes back only when the answer is
// clean, out of Go's hands, with nothing of the answer left unread.
func TestPumpResetsIdleSession(t *testing.T) {
	t.Parallel()
	ok := enc(t, &pgproto3.CommandComplete{CommandTag: []byte("DISCARD ALL")}, &pgproto3.ReadyForQuery{TxStatus: 'I'})
	failed := enc(t, &pgproto3.ErrorResponse{Severity: "ERROR", Code: "XX000", Message: "no"}, &pgproto3.ReadyForQuery{TxStatus: 'I'})
	for _, tc := range []struct {
		name   string
		answer []byte // nil: the server never answers
		kept   bool
	}{
		{"clean", ok, true},
		{"error", failed, false},
		{"no answer", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := newPump(false)
			if err != nil {
				t.Fatal(err)
			}
			defer p.close()
			client, app := socketPair(t)
			server, backend := socketPair(t)
			defer app.Close()
			defer backend.Close()
			sc := &serverConn{Conn: server, fd: -1}
			ended := make(chan int, 1)
			then := func(server int) { ended <- server }
			res, err := p.addSession(client, sc, time.Minute, &sessionTrack{}, newPumpReset([]string{resetQuery}, 300*time.Millisecond, then), false, nil)
			if err != nil {
				t.Fatal(err)
			}
			app.Write(enc(t, &pgproto3.Query{String: "SELECT 1"}))
			buf := make([]byte, 512)
			backend.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := backend.Read(buf); err != nil {
				t.Fatal(err)
			}
			reply := enc(t, &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}, &pgproto3.ReadyForQuery{TxStatus: 'I'})
			backend.Write(reply)
			// A client terminates once it has the answer: before that the session
			// is mid-query, and the pump rightly closes it rather than reset it.
			app.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(app, make([]byte, len(reply))); err != nil {
				t.Fatal(err)
			}
			app.Write(enc(t, &pgproto3.Terminate{}))
			app.Close()
			n, err := backend.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			want := enc(t, &pgproto3.Query{String: resetQuery})
			if string(buf[:n]) != string(want) {
				t.Fatalf("server got %q, want the reset (and no Terminate)", buf[:n])
			}
			if tc.answer != nil {
				backend.Write(tc.answer)
			}
			select {
			case r := <-res:
				if !r.resetting {
					t.Fatalf("result %+v, want the reset under way", r)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the client's leaving was not reported")
			}
			// Nobody drains the ended reset: the pump's drainer runs it once the
			// loop has nothing to do.
			var fd int
			select {
			case fd = <-ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the reset's end was not told")
			}
			if kept := fd >= 0; kept != tc.kept {
				t.Fatalf("server socket kept: %v, want %v", kept, tc.kept)
			}
			if !tc.kept {
				if _, err := backend.Read(buf); err == nil {
					t.Fatal("the server connection is still open after a failed reset")
				}
				return
			}
			sc.detach(fd)
			if !sc.alive() {
				t.Fatal("the reset server session is not alive")
			}
			if err := sc.attach(); err != nil {
				t.Fatal(err)
			}
			defer sc.Close()
			sc.Write([]byte("ping"))
			if n, err := backend.Read(buf); err != nil || string(buf[:n]) != "ping" {
				t.Fatalf("server read %q, %v through the taken-back connection", buf[:n], err)
			}
		})
	}
}

package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// statusOf decodes a session's recorded ParameterStatus messages.
func statusOf(t *testing.T, sc *serverConn) map[string]string {
	t.Helper()
	out := map[string]string{}
	for rest := sc.status; len(rest) > 0; {
		n := 1 + int(uint32(rest[1])<<24|uint32(rest[2])<<16|uint32(rest[3])<<8|uint32(rest[4]))
		var ps pgproto3.ParameterStatus
		if rest[0] != 'S' || ps.Decode(rest[5:n]) != nil {
			t.Fatalf("recorded status is not ParameterStatus messages: %q", sc.status)
		}
		if _, dup := out[ps.Name]; dup {
			t.Fatalf("%s recorded twice", ps.Name)
		}
		out[ps.Name] = ps.Value
		rest = rest[n:]
	}
	return out
}

func startedSession(t *testing.T) *serverConn {
	return &serverConn{status: enc(t, &pgproto3.ParameterStatus{Name: "TimeZone", Value: "UTC"},
		&pgproto3.ParameterStatus{Name: "DateStyle", Value: "ISO, MDY"})}
}

// Reports the server sends to a client during its session, split across reads
// anywhere, update what the next client's greeting shows; application_name does
// not (each client's is set on its own).
func TestSessionTrackNotesReports(t *testing.T) {
	answer := enc(t, &pgproto3.ParameterStatus{Name: "TimeZone", Value: "Asia/Tokyo"},
		&pgproto3.CommandComplete{CommandTag: []byte("SET")}, &pgproto3.ReadyForQuery{TxStatus: 'I'},
		&pgproto3.ParameterStatus{Name: "IntervalStyle", Value: "iso_8601"},
		&pgproto3.ParameterStatus{Name: "application_name", Value: "psql"},
		&pgproto3.CommandComplete{CommandTag: []byte("SET")}, &pgproto3.ReadyForQuery{TxStatus: 'I'})
	want := map[string]string{"TimeZone": "Asia/Tokyo", "DateStyle": "ISO, MDY", "IntervalStyle": "iso_8601"}
	for n := 1; n <= len(answer); n++ {
		sc := startedSession(t)
		tr := &sessionTrack{reports: statusCapture{sc: sc}, syncs: 2}
		feedServer(tr, answer, n)
		got := statusOf(t, sc)
		if len(got) != len(want) || got["TimeZone"] != want["TimeZone"] || got["IntervalStyle"] != want["IntervalStyle"] || got["DateStyle"] != want["DateStyle"] {
			t.Fatalf("chunks of %d: status %v, want %v", n, got, want)
		}
		if !tr.idle() {
			t.Fatalf("chunks of %d: not idle", n)
		}
	}
}

// A report too long to keep leaves the recorded values stale: the session is not
// reused.
func TestSessionTrackLongReport(t *testing.T) {
	sc := startedSession(t)
	tr := &sessionTrack{reports: statusCapture{sc: sc}, syncs: 1}
	feedServer(tr, enc(t, &pgproto3.ParameterStatus{Name: "search_path", Value: strings.Repeat("x", maxStatusBody)},
		&pgproto3.CommandComplete{CommandTag: []byte("SET")}, &pgproto3.ReadyForQuery{TxStatus: 'I'}), 7)
	if tr.idle() {
		t.Fatal("a session whose report was not kept looks reusable")
	}
}

// Reports in a reset's answer (a reload the session took in, the values the reset
// restored) update the recorded values too, however the answer is split.
func TestPumpResetNotesReports(t *testing.T) {
	answer := enc(t, &pgproto3.ParameterStatus{Name: "TimeZone", Value: "Europe/Paris"},
		&pgproto3.CommandComplete{CommandTag: []byte("DISCARD ALL")}, &pgproto3.ReadyForQuery{TxStatus: 'I'})
	for n := 1; n <= len(answer); n++ {
		sc := startedSession(t)
		r := newPumpReset([]string{resetQuery}, time.Second, nil)
		r.reports.sc = sc
		if done, ok := takeInChunks(r, answer, n); !done || !ok {
			t.Fatalf("chunks of %d: done %v ok %v", n, done, ok)
		}
		if got := statusOf(t, sc); got["TimeZone"] != "Europe/Paris" || len(got) != 2 {
			t.Fatalf("chunks of %d: status %v", n, got)
		}
	}
}

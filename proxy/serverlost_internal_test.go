package proxy

import (
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestServerLost: a client is told its server connection ended only when the
// server's stream is between messages and its last message was not an error, in
// chunks of any size.
func TestServerLost(t *testing.T) {
	rows := enc(t, &pgproto3.RowDescription{}, &pgproto3.DataRow{Values: [][]byte{[]byte("v")}})
	cases := []struct {
		name string
		sent []byte
		want bool
	}{
		{"nothing", nil, true},
		{"idle", enc(t, &pgproto3.ReadyForQuery{TxStatus: 'I'}), true},
		{"mid-result", rows, true},
		{"a notice last", enc(t, &pgproto3.NoticeResponse{Severity: "WARNING", Code: "57P01"}), true},
		{"an error last", enc(t, &pgproto3.ErrorResponse{Severity: "FATAL", Code: "57P01"}), false},
		{"mid-message", rows[:len(rows)-1], false},
		{"ReadyForQuery's status to come", enc(t, &pgproto3.ReadyForQuery{TxStatus: 'I'})[:5], false},
	}
	for _, c := range cases {
		for n := 1; n <= max(len(c.sent), 1); n++ {
			tr := &sessionTrack{}
			feedServer(tr, c.sent, n)
			if got := tr.serverLost(); got != c.want {
				t.Errorf("%s in chunks of %d: serverLost %v, want %v", c.name, n, got, c.want)
			}
		}
	}
	var none *sessionTrack
	if none.serverLost() {
		t.Error("an untracked session is told")
	}
}

package integration

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestStandInSaltKept: a role that does not exist gets the same SCRAM salt after
// a restart, as a real role does, so that comparing the salts a server gave
// before and after does not tell which roles exist.
func TestStandInSaltKept(t *testing.T) {
	s := startServer(t, newStateDir(t), "--auth", "scram-sha-256")
	s.seedSQL("app", rolesSQL)
	before := map[string]string{}
	for _, user := range []string{"alice", "nobody"} {
		before[user] = scramSalt(t, s.addr, user)
	}
	if before["alice"] == before["nobody"] {
		t.Fatalf("alice and nobody got the same salt %q", before["alice"])
	}
	s.stop()
	s.start()
	for _, user := range []string{"alice", "nobody"} {
		if got := scramSalt(t, s.addr, user); got != before[user] {
			t.Errorf("%s: salt %q after a restart, %q before", user, got, before[user])
		}
	}
}

// scramSalt starts a SCRAM login of user at addr and returns the salt of the
// server-first message, then leaves.
func scramSalt(t *testing.T, addr, user string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fe := pgproto3.NewFrontend(c, c)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
		Parameters: map[string]string{"user": user, "database": "app@salt"}})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if msg, err := fe.Receive(); err != nil {
		t.Fatal(err)
	} else if _, ok := msg.(*pgproto3.AuthenticationSASL); !ok {
		t.Fatalf("%s: %#v, want AuthenticationSASL", user, msg)
	}
	fe.Send(&pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: []byte("n,,n=,r=clientnonce")})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	msg, err := fe.Receive()
	if err != nil {
		t.Fatal(err)
	}
	cont, ok := msg.(*pgproto3.AuthenticationSASLContinue)
	if !ok {
		t.Fatalf("%s: %#v, want AuthenticationSASLContinue", user, msg)
	}
	for _, attr := range strings.Split(string(cont.Data), ",") {
		if salt, ok := strings.CutPrefix(attr, "s="); ok {
			return salt
		}
	}
	t.Fatalf("%s: no salt in %q", user, cont.Data)
	return ""
}

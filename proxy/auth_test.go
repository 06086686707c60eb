package proxy_test

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgbranchproxy/pgbranchproxy/branches/errs"
	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"go.uber.org/zap"
)

// scramVerifier builds a rolpassword as Postgres stores it for password.
func scramVerifier(t *testing.T, password string) string {
	t.Helper()
	salt, iter := []byte("pgbranchproxy-salt"), 4096
	salted, err := pbkdf2.Key(sha256.New, password, salt, iter, sha256.Size)
	if err != nil {
		t.Fatal(err)
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iter, b64(salt), b64(stored[:]), b64(mac(salted, "Server Key")))
}

// md5Verifier builds an md5 rolpassword.
func md5Verifier(user, password string) string {
	sum := md5.Sum([]byte(password + user))
	return "md5" + hex.EncodeToString(sum[:])
}

// withRoles makes Roles return set and err.
func withRoles(set roles.Set, err error) func(*fakeBranches) {
	return func(b *fakeBranches) { b.roles, b.rolesErr = set, err }
}

func testRoles(t *testing.T) roles.Set {
	past := time.Now().Add(-time.Hour)
	return roles.Set{
		"alice": {Name: "alice", Password: scramVerifier(t, "alice-pw"), CanLogin: true},
		"bob":   {Name: "bob", Password: md5Verifier("bob", "bob-pw"), CanLogin: true},
		"carol": {Name: "carol", Password: scramVerifier(t, "carol-pw")}, // NOLOGIN
		"dave":  {Name: "dave", Password: scramVerifier(t, "dave-pw"), CanLogin: true, ValidUntil: &past},
		"erin":  {Name: "erin", CanLogin: true}, // no password
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, user, password string
		ok                     bool
	}{
		{proxy.AuthSCRAM, "alice", "alice-pw", true},
		{proxy.AuthSCRAM, "alice", "wrong", false},
		{proxy.AuthSCRAM, "nobody", "alice-pw", false},
		{proxy.AuthSCRAM, "bob", "bob-pw", false}, // an md5 verifier cannot serve SCRAM, as in Postgres
		{proxy.AuthSCRAM, "carol", "carol-pw", false},
		{proxy.AuthSCRAM, "dave", "dave-pw", false},
		{proxy.AuthSCRAM, "erin", "", false},
		{proxy.AuthMD5, "bob", "bob-pw", true},
		{proxy.AuthMD5, "bob", "wrong", false},
		{proxy.AuthMD5, "alice", "alice-pw", true}, // md5 accepts a SCRAM verifier with SCRAM
		{proxy.AuthMD5, "nobody", "bob-pw", false},
		{proxy.AuthTrust, "nobody", "", true},
	}
	for _, tt := range tests {
		verdict := "refused"
		if tt.ok {
			verdict = "accepted"
		}
		t.Run(fmt.Sprintf("%s %s %s %s", tt.method, tt.user, tt.password, verdict), func(t *testing.T) {
			t.Parallel()
			cfg := defaultConfig()
			cfg.Auth = tt.method
			p, fb, fs := setup(t, cfg, scriptOK, nil, withRoles(testRoles(t), nil))
			conn, err := p.connectAs(t, tt.user, tt.password, "dbname=app@feat")
			if tt.method != proxy.AuthTrust {
				if r := recv(t, fb.lookups, "Roles"); r.Database != "app" || r.Branch != "feat" {
					t.Errorf("Roles for %+v, want app@feat", r)
				}
			}
			if tt.ok {
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				query(t, conn)
				recv(t, fb.routes, "Acquire")
				return
			}
			pe := pgError(t, err)
			want := fmt.Sprintf("password authentication failed for user %q", tt.user)
			if pe.Code != "28P01" || pe.Message != want {
				t.Errorf("got %s %q, want 28P01 %q", pe.Code, pe.Message, want)
			}
			noneYet(t, fb.routes, "Acquire before authentication")
			noneYet(t, fs.startups, "startup at the branch server before authentication")
		})
	}
}

// TestAuthFailureLimit: an address that failed too often is refused, even with the
// right password, without looking up roles.
func TestAuthFailureLimit(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Auth = proxy.AuthSCRAM
	cfg.FailedLogins = 2
	p, fb, _ := setup(t, cfg, scriptOK, nil, withRoles(testRoles(t), nil))
	for range 2 {
		_, err := p.connectAs(t, "alice", "wrong", "dbname=app@feat")
		if pe := pgError(t, err); pe.Code != "28P01" {
			t.Fatalf("wrong password: %s %q, want 28P01", pe.Code, pe.Message)
		}
		recv(t, fb.lookups, "Roles")
	}
	_, err := p.connectAs(t, "alice", "alice-pw", "dbname=app@feat")
	pe := pgError(t, err)
	if pe.Code != "28P01" || !strings.Contains(pe.Message, "too many failed login attempts") {
		t.Errorf("after 2 failures: %s %q, want 28P01 too many failed login attempts", pe.Code, pe.Message)
	}
	noneYet(t, fb.lookups, "Roles for a blocked address")
	noneYet(t, fb.routes, "Acquire for a blocked address")
}

// TestAuthRolesErrors: errors looking up roles reach the client with their SQLSTATE.
func TestAuthRolesErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		err      error
		wantCode string
	}{
		{"not found", fmt.Errorf("source %q: %w", "app", errs.ErrNotFound), "3D000"},
		{"not ready", fmt.Errorf("seed: %w", errs.ErrNotReady), "57P03"},
		{"internal", errors.New("catalog: read /secret/state.db: disk I/O error"), "XX000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := defaultConfig()
			cfg.Auth = proxy.AuthSCRAM
			p, fb, _ := setup(t, cfg, scriptOK, nil, withRoles(nil, tt.err))
			_, err := p.connectAs(t, "alice", "alice-pw", "dbname=app@feat")
			pe := pgError(t, err)
			if pe.Code != tt.wantCode {
				t.Errorf("SQLSTATE = %s (%q), want %s", pe.Code, pe.Message, tt.wantCode)
			}
			if strings.Contains(pe.Message+pe.Detail+pe.Hint, "/secret") {
				t.Errorf("internal error leaked to the client: %+v", pe)
			}
			if tt.wantCode == "XX000" {
				checkErrorID(t, p, pe.Detail)
			}
			noneYet(t, fb.routes, "Acquire")
		})
	}
}

// A failed login is logged once, where it is refused, with the SQLSTATE its client
// got: a password guesser's every try was two lines.
func TestAuthFailureLoggedOnce(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Auth = proxy.AuthSCRAM
	p, _, _ := setup(t, cfg, scriptOK, nil, withRoles(testRoles(t), nil))
	_, err := p.connectAs(t, "alice", "wrong", "dbname=app@feat")
	if pe := pgError(t, err); pe.Code != "28P01" {
		t.Fatalf("wrong password: %s %q, want 28P01", pe.Code, pe.Message)
	}
	var lines []string
	for _, e := range p.logs.All() {
		if e.Level >= zap.InfoLevel {
			lines = append(lines, fmt.Sprintf("%s %v", e.Message, e.ContextMap()))
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "sqlstate:28P01") || !strings.Contains(lines[0], `password authentication failed for user "alice"`) {
		t.Errorf("log of a failed login:\n%s\nwant one line with sqlstate 28P01 and the user", strings.Join(lines, "\n"))
	}
}

// TestAuthMD5MethodTellsNothing: under md5, the exchange a role is asked for
// depends only on the kind of its verifier, as in Postgres: a role that does not
// exist, has no password, cannot log in or whose password expired is asked for
// SCRAM, as a role with a SCRAM verifier is (Postgres's password_encryption
// default), so the first message does not tell that it is missing.
func TestAuthMD5MethodTellsNothing(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Auth = proxy.AuthMD5
	set := testRoles(t)
	past := time.Now().Add(-time.Hour)
	set["frank"] = roles.Role{Name: "frank", Password: md5Verifier("frank", "frank-pw"), CanLogin: true, ValidUntil: &past}
	p, _, _ := setup(t, cfg, scriptOK, nil, withRoles(set, nil))
	for user, want := range map[string]string{
		"alice": "SASL", "carol": "SASL", "dave": "SASL", "erin": "SASL", "nobody": "SASL",
		"bob":   "MD5",  // an md5 verifier: Postgres asks for md5 too
		"frank": "SASL", // an md5 verifier past VALID UNTIL, which Postgres does not read
	} {
		c := p.dial(t)
		fe := pgproto3.NewFrontend(c, c)
		fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
			Parameters: map[string]string{"user": user, "database": "app@feat"}})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(within))
		msg, err := fe.Receive()
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		got := fmt.Sprintf("%T", msg)
		switch msg.(type) {
		case *pgproto3.AuthenticationSASL:
			got = "SASL"
		case *pgproto3.AuthenticationMD5Password:
			got = "MD5"
		}
		if got != want {
			t.Errorf("%s asked for %s, want %s", user, got, want)
		}
		c.Close()
	}
}

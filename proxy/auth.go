package proxy

import (
	"crypto/md5"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
)

// Authentication methods at the proxy.
const (
	AuthSCRAM = "scram-sha-256"
	AuthMD5   = "md5"
	AuthTrust = "trust"
)

// errAuthFailed is a failed login; the client always sees the same 28P01 message,
// whether the role exists or not.
var errAuthFailed = errors.New("password authentication failed")

// errTooManyFailures refuses an address that failed to log in too often.
var errTooManyFailures = errors.New("too many failed login attempts")

// maxAuthMessage bounds a client's password or SASL message.
const maxAuthMessage = 8192

// authenticate runs the configured method with the client for user, against the
// role found in set (or a stand-in when there is none, so that a missing role looks
// like a wrong password). It returns nil when the client proved the password.
func (s *Server) authenticate(conn net.Conn, user string, set roles.Set) error {
	role, exists := set[user]
	usable := exists && role.CanAuthenticate(time.Now())
	method := s.cfg.Auth
	if method == AuthMD5 && !hasMD5Verifier(role, time.Now()) {
		// As Postgres does: md5 in hba accepts a SCRAM verifier with SCRAM, and asks
		// a role without a verifier it reads (no role, no password, one past VALID
		// UNTIL) for what password_encryption makes, SCRAM by default, so the
		// exchange does not tell that it is missing.
		method = AuthSCRAM
	}
	switch method {
	case AuthMD5:
		return s.authMD5(conn, user, role.Password, usable)
	default:
		v, ok := parseSCRAMVerifier(role.Password)
		if !usable || !ok {
			v, usable = fakeVerifier(s.fakeSecret, user), false
		}
		return s.authSCRAM(conn, v, usable)
	}
}

// hasMD5Verifier reports whether Postgres would answer role with md5 under md5
// in hba at t: it has an md5 verifier that has not expired (get_role_password
// reads no password past VALID UNTIL).
func hasMD5Verifier(role roles.Role, t time.Time) bool {
	return strings.HasPrefix(role.Password, "md5") && (role.ValidUntil == nil || !t.After(*role.ValidUntil))
}

func (s *Server) authSCRAM(conn net.Conn, v scramVerifier, usable bool) error {
	if err := writeMsg(conn, &pgproto3.AuthenticationSASL{AuthMechanisms: []string{scramMechanism}}); err != nil {
		return err
	}
	typ, msg, err := readMessage(conn, maxAuthMessage)
	if err != nil {
		return err
	}
	if typ != 'p' {
		return fmt.Errorf("%w: expected SASL response, got message type %q", errProtocol, typ)
	}
	var init pgproto3.SASLInitialResponse
	if err := init.Decode(msg[5:]); err != nil {
		return fmt.Errorf("%w: invalid SASL initial response", errProtocol)
	}
	if init.AuthMechanism != scramMechanism {
		return fmt.Errorf("%w: client selected an invalid SASL authentication mechanism", errProtocol)
	}
	srv := newSCRAMServer(v)
	first, err := srv.start(init.Data)
	if err != nil {
		return fmt.Errorf("%w: %v", errProtocol, err)
	}
	if err := writeMsg(conn, &pgproto3.AuthenticationSASLContinue{Data: []byte(first)}); err != nil {
		return err
	}
	typ, msg, err = readMessage(conn, maxAuthMessage)
	if err != nil {
		return err
	}
	if typ != 'p' {
		return fmt.Errorf("%w: expected SASL response, got message type %q", errProtocol, typ)
	}
	final, ok, err := srv.finish(msg[5:])
	if err != nil {
		return fmt.Errorf("%w: %v", errProtocol, err)
	}
	if !ok || !usable {
		return errAuthFailed
	}
	return writeMsg(conn, &pgproto3.AuthenticationSASLFinal{Data: []byte(final)})
}

func (s *Server) authMD5(conn net.Conn, user, stored string, usable bool) error {
	var salt [4]byte
	rand.Read(salt[:])
	if err := writeMsg(conn, &pgproto3.AuthenticationMD5Password{Salt: salt}); err != nil {
		return err
	}
	typ, msg, err := readMessage(conn, maxAuthMessage)
	if err != nil {
		return err
	}
	if typ != 'p' {
		return fmt.Errorf("%w: expected password response, got message type %q", errProtocol, typ)
	}
	got := strings.TrimRight(string(msg[5:]), "\x00")
	if !usable || !strings.HasPrefix(stored, "md5") || len(stored) != 35 {
		return errAuthFailed
	}
	sum := md5.Sum(append([]byte(stored[3:]), salt[:]...))
	want := "md5" + hex.EncodeToString(sum[:])
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return errAuthFailed
	}
	return nil
}

func writeMsg(conn net.Conn, m pgproto3.BackendMessage) error {
	buf, err := m.Encode(nil)
	if err != nil {
		return err
	}
	_, err = conn.Write(buf)
	return err
}

package proxy

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// SCRAM-SHA-256 (RFC 5802, RFC 7677) as Postgres speaks it: the user name inside the
// exchange is ignored (the startup packet's counts), and channel binding is not
// offered, so a client may send gs2 flag "n" or "y" but never "p".

const scramMechanism = "SCRAM-SHA-256"

var errSCRAM = errors.New("malformed SCRAM message")

// scramVerifier is a parsed rolpassword "SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>".
type scramVerifier struct {
	iterations int
	salt       []byte
	storedKey  []byte
	serverKey  []byte
}

func parseSCRAMVerifier(s string) (scramVerifier, bool) {
	rest, ok := strings.CutPrefix(s, scramMechanism+"$")
	if !ok {
		return scramVerifier{}, false
	}
	iterSalt, keys, ok := strings.Cut(rest, "$")
	if !ok {
		return scramVerifier{}, false
	}
	iter, salt64, ok1 := strings.Cut(iterSalt, ":")
	stored64, server64, ok2 := strings.Cut(keys, ":")
	if !ok1 || !ok2 {
		return scramVerifier{}, false
	}
	var v scramVerifier
	var err error
	if v.iterations, err = strconv.Atoi(iter); err != nil || v.iterations <= 0 {
		return scramVerifier{}, false
	}
	if v.salt, err = base64.StdEncoding.DecodeString(salt64); err != nil {
		return scramVerifier{}, false
	}
	if v.storedKey, err = base64.StdEncoding.DecodeString(stored64); err != nil || len(v.storedKey) != sha256.Size {
		return scramVerifier{}, false
	}
	if v.serverKey, err = base64.StdEncoding.DecodeString(server64); err != nil || len(v.serverKey) != sha256.Size {
		return scramVerifier{}, false
	}
	return v, true
}

// fakeVerifier is used for roles that do not exist or cannot log in: the exchange
// looks the same as a real one (a salt that is stable per user name, so repeated
// attempts cannot tell), and no proof can match it.
func fakeVerifier(secret []byte, user string) scramVerifier {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("salt\x00" + user))
	salt := mac.Sum(nil)[:16]
	stored := make([]byte, sha256.Size)
	rand.Read(stored)
	return scramVerifier{iterations: 4096, salt: salt, storedKey: stored, serverKey: stored}
}

// clientFirst is the parsed client-first-message.
type clientFirst struct {
	gs2Header string // "n,," or "y,," (with an optional authzid, which Postgres refuses)
	bare      string // client-first-message-bare
	nonce     string
}

func parseClientFirst(msg string) (clientFirst, error) {
	// gs2-header: cbind-flag "," [authzid] ","
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return clientFirst{}, errSCRAM
	}
	switch {
	case flag == "n", flag == "y":
	case strings.HasPrefix(flag, "p="):
		return clientFirst{}, fmt.Errorf("%w: channel binding was not offered", errSCRAM)
	default:
		return clientFirst{}, errSCRAM
	}
	authzid, bare, ok := strings.Cut(rest, ",")
	if !ok || authzid != "" {
		return clientFirst{}, errSCRAM // Postgres does not support an authorization identity
	}
	cf := clientFirst{gs2Header: flag + ",,", bare: bare}
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return clientFirst{}, errSCRAM
	}
	cf.nonce = attrs[1][2:]
	if cf.nonce == "" || !printable(cf.nonce) {
		return clientFirst{}, errSCRAM
	}
	return cf, nil
}

// printable reports whether s holds only printable ASCII other than ','.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return true
}

// clientFinal is the parsed client-final-message.
type clientFinal struct {
	channelBinding string // base64 of the gs2 header
	nonce          string
	proof          []byte
	withoutProof   string
}

func parseClientFinal(msg string) (clientFinal, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return clientFinal{}, errSCRAM
	}
	cf := clientFinal{withoutProof: msg[:i]}
	proof, err := base64.StdEncoding.DecodeString(msg[i+3:])
	if err != nil || len(proof) != sha256.Size {
		return clientFinal{}, errSCRAM
	}
	cf.proof = proof
	attrs := strings.Split(cf.withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return clientFinal{}, errSCRAM
	}
	cf.channelBinding, cf.nonce = attrs[0][2:], attrs[1][2:]
	return cf, nil
}

// scramServer runs one exchange. The zero value is not usable; use newSCRAMServer.
type scramServer struct {
	v           scramVerifier
	first       clientFirst
	serverFirst string
	nonce       string
}

func newSCRAMServer(v scramVerifier) *scramServer { return &scramServer{v: v} }

// start takes the client-first-message and returns the server-first-message.
func (s *scramServer) start(clientFirstMsg []byte) (string, error) {
	cf, err := parseClientFirst(string(clientFirstMsg))
	if err != nil {
		return "", err
	}
	var b [18]byte
	rand.Read(b[:])
	s.first = cf
	s.nonce = cf.nonce + base64.RawStdEncoding.EncodeToString(b[:])
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.v.salt) + ",i=" + strconv.Itoa(s.v.iterations)
	return s.serverFirst, nil
}

// finish takes the client-final-message; it returns the server-final-message when
// the proof is right, and ok=false when it is not.
func (s *scramServer) finish(clientFinalMsg []byte) (serverFinal string, ok bool, err error) {
	cf, err := parseClientFinal(string(clientFinalMsg))
	if err != nil {
		return "", false, err
	}
	if cf.channelBinding != base64.StdEncoding.EncodeToString([]byte(s.first.gs2Header)) || cf.nonce != s.nonce {
		return "", false, errSCRAM
	}
	authMessage := s.first.bare + "," + s.serverFirst + "," + cf.withoutProof
	clientSig := hmacSHA256(s.v.storedKey, authMessage)
	clientKey := make([]byte, sha256.Size)
	for i := range clientKey {
		clientKey[i] = cf.proof[i] ^ clientSig[i]
	}
	sum := sha256.Sum256(clientKey)
	if subtle.ConstantTimeCompare(sum[:], s.v.storedKey) != 1 {
		return "", false, nil
	}
	return "v=" + base64.StdEncoding.EncodeToString(hmacSHA256(s.v.serverKey, authMessage)), true, nil
}

func hmacSHA256(key []byte, msg string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msg))
	return mac.Sum(nil)
}

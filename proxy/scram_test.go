package proxy

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
)

// makeVerifier builds a rolpassword the way Postgres does for password.
func makeVerifier(t testing.TB, password string, salt []byte, iter int) string {
	t.Helper()
	salted, err := pbkdf2.Key(sha256.New, password, salt, iter, sha256.Size)
	if err != nil {
		t.Fatal(err)
	}
	clientKey := hmacSHA256(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	server := hmacSHA256(salted, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return scramMechanism + "$" + itoa(iter) + ":" + b64(salt) + "$" + b64(stored[:]) + ":" + b64(server)
}

func itoa(n int) string {
	s := ""
	for n > 0 {
		s = string(rune('0'+n%10)) + s
		n /= 10
	}
	return s
}

// clientProof plays the client side of one exchange.
func clientProof(t testing.TB, password, gs2, clientFirstBare, serverFirst string) (final string, serverSig []byte) {
	t.Helper()
	attrs := map[string]string{}
	for _, a := range strings.Split(serverFirst, ",") {
		attrs[a[:1]] = a[2:]
	}
	salt, _ := base64.StdEncoding.DecodeString(attrs["s"])
	iter := 0
	for _, c := range attrs["i"] {
		iter = iter*10 + int(c-'0')
	}
	salted, _ := pbkdf2.Key(sha256.New, password, salt, iter, sha256.Size)
	clientKey := hmacSHA256(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	withoutProof := "c=" + base64.StdEncoding.EncodeToString([]byte(gs2)) + ",r=" + attrs["r"]
	authMessage := clientFirstBare + "," + serverFirst + "," + withoutProof
	sig := hmacSHA256(stored[:], authMessage)
	proof := make([]byte, len(clientKey))
	for i := range proof {
		proof[i] = clientKey[i] ^ sig[i]
	}
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof), hmacSHA256(hmacSHA256(salted, "Server Key"), authMessage)
}

func TestSCRAMExchange(t *testing.T) {
	t.Parallel()
	stored := makeVerifier(t, "s3cret", []byte("0123456789abcdef"), 4096)
	v, ok := parseSCRAMVerifier(stored)
	if !ok {
		t.Fatalf("verifier %q did not parse", stored)
	}
	for _, tc := range []struct {
		name, password, gs2 string
		wantOK              bool
	}{
		{"right password", "s3cret", "n,,", true},
		{"client supports channel binding, server offers none", "s3cret", "y,,", true},
		{"wrong password", "guess", "n,,", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newSCRAMServer(v)
			bare := "n=,r=clientnonce123"
			first, err := srv.start([]byte(tc.gs2 + bare))
			if err != nil {
				t.Fatal(err)
			}
			final, wantSig := clientProof(t, tc.password, tc.gs2, bare, first)
			serverFinal, ok, err := srv.finish([]byte(final))
			if err != nil || ok != tc.wantOK {
				t.Fatalf("finish: ok %v err %v, want ok %v", ok, err, tc.wantOK)
			}
			if ok && serverFinal != "v="+base64.StdEncoding.EncodeToString(wantSig) {
				t.Errorf("server signature %q", serverFinal)
			}
		})
	}
}

func TestSCRAMRejects(t *testing.T) {
	t.Parallel()
	v, _ := parseSCRAMVerifier(makeVerifier(t, "pw", []byte("salt-salt-salt-1"), 4096))
	for _, first := range []string{
		"", "n", "n,", "n,,", "x,,n=,r=a", "p=tls-server-end-point,,n=,r=a", "n,a=someone,n=,r=a",
		"n,,r=a", "n,,n=,r=", "n,,n=,r=a b", "n,,m=ext,n=,r=a",
	} {
		if _, err := newSCRAMServer(v).start([]byte(first)); err == nil {
			t.Errorf("client-first %q accepted", first)
		}
	}
	srv := newSCRAMServer(v)
	first, _ := srv.start([]byte("n,,n=,r=abc"))
	nonce := strings.Split(first, ",")[0][2:]
	for _, final := range []string{
		"", "c=biws,r=" + nonce, "c=biws,r=" + nonce + ",p=notbase64!", "c=eSws,r=" + nonce + ",p=" + base64.StdEncoding.EncodeToString(make([]byte, 32)),
		"c=biws,r=wrongnonce,p=" + base64.StdEncoding.EncodeToString(make([]byte, 32)),
		"c=biws,r=" + nonce + ",p=" + base64.StdEncoding.EncodeToString(make([]byte, 31)),
	} {
		if _, ok, err := srv.finish([]byte(final)); ok || err == nil {
			t.Errorf("client-final %q: ok %v err %v", final, ok, err)
		}
	}
	for _, bad := range []string{"", "md5abc", "SCRAM-SHA-256$x:c2FsdA==$a:b", "SCRAM-SHA-256$4096:c2FsdA==$YQ==:YQ=="} {
		if _, ok := parseSCRAMVerifier(bad); ok {
			t.Errorf("verifier %q parsed", bad)
		}
	}
}

func TestFakeVerifierIsStableAndUnusable(t *testing.T) {
	t.Parallel()
	secret := []byte("server secret")
	a, b := fakeVerifier(secret, "ghost"), fakeVerifier(secret, "ghost")
	if !hmac.Equal(a.salt, b.salt) || hmac.Equal(a.salt, fakeVerifier(secret, "other").salt) {
		t.Error("stand-in salt must be stable per user and differ between users")
	}
}

// FuzzSCRAM feeds arbitrary client messages to the server side of the exchange.
func FuzzSCRAM(f *testing.F) {
	f.Add([]byte("n,,n=,r=abc"), []byte("c=biws,r=abcdef,p=AAAA"))
	f.Add([]byte("y,,n=user,r=x,ext=1"), []byte("c=eSws,r=x,p="))
	f.Add([]byte("p=tls-server-end-point,,n=,r=a"), []byte(""))
	f.Add([]byte(",,,,"), []byte(",p=,p=,p="))
	v := fakeVerifier([]byte("k"), "u")
	f.Fuzz(func(t *testing.T, first, final []byte) {
		srv := newSCRAMServer(v)
		sf, err := srv.start(first)
		if err != nil {
			return
		}
		if !strings.HasPrefix(sf, "r=") {
			t.Fatalf("server-first %q", sf)
		}
		if _, ok, _ := srv.finish(final); ok {
			t.Fatal("a fuzzed proof matched an unusable verifier")
		}
	})
}

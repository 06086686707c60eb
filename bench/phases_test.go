package main

import (
	"encoding/binary"
	"net"
	"strings"
	"testing"
)

func message(t byte, body string) []byte {
	b := []byte{t, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(4+len(body)))
	return append(b, body...)
}

func TestStartupPacket(t *testing.T) {
	b := startupPacket("postgres", "app@x")
	if got := binary.BigEndian.Uint32(b); int(got) != len(b) {
		t.Fatalf("length %d, packet %d bytes", got, len(b))
	}
	if v := binary.BigEndian.Uint32(b[4:]); v != 196608 {
		t.Fatalf("protocol %d", v)
	}
	if want := "user\x00postgres\x00database\x00app@x\x00\x00"; string(b[8:]) != want {
		t.Fatalf("parameters %q", b[8:])
	}
}

func TestReadUntilReady(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		msgs       [][]byte
	}{
		{"ok", "", [][]byte{message('R', "\x00\x00\x00\x00"), message('S', "a\x00b\x00"), message('Z', "I")}},
		{"error", "server error: no such branch", [][]byte{message('E', "SFATAL\x00C3D000\x00Mno such branch\x00\x00")}},
		{"password", "the server asked for a password", [][]byte{message('R', "\x00\x00\x00\x0a")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			go func() {
				defer server.Close()
				for _, m := range tc.msgs {
					server.Write(m)
				}
			}()
			err := readUntilReady(client)
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Request codes a client can send in place of a protocol version.
const (
	codeCancel   = 80877102
	codeSSL      = 80877103
	codeGSSENC   = 80877104
	minStartup   = 8 // length word plus code
	protocolV3   = 3 << 16
	majorVersion = 0xffff0000
)

// DefaultMaxStartupPacket is the largest startup packet accepted, as in Postgres
// (MAX_STARTUP_PACKET_LENGTH).
const DefaultMaxStartupPacket = 10000

var (
	errStartupLength = errors.New("invalid length of startup packet")
	errMessageLength = errors.New("invalid message length")
)

// readStartup reads one startup-phase packet: a 4-byte length that counts itself,
// then a 4-byte code (protocol version or request code), then the rest. It returns
// the code and the body after the length word (code included). It reads exactly a
// valid packet's bytes; of a packet whose length is invalid, up to 8.
func readStartup(r io.Reader, max int) (code uint32, body []byte, err error) {
	// The length word and the code in one read where they arrive together (a
	// system call less per packet): every valid packet has both, so the read
	// cannot reach into whatever the client sends next.
	var hdr [minStartup]byte
	got, err := io.ReadAtLeast(r, hdr[:], 4)
	if err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < minStartup || n > uint32(max) {
		return 0, nil, fmt.Errorf("%w (%d bytes)", errStartupLength, n)
	}
	body = make([]byte, n-4)
	copy(body, hdr[4:got])
	if _, err := io.ReadFull(r, body[got-4:]); err != nil {
		if got > 4 && err == io.EOF {
			err = io.ErrUnexpectedEOF // part of the packet came
		}
		return 0, nil, err
	}
	return binary.BigEndian.Uint32(body), body, nil
}

// readMessage reads one regular protocol message: a type byte, a 4-byte length that
// counts itself, then the body. It returns the whole message (type, length and body)
// so it can be forwarded as it is. Messages longer than max are refused.
func readMessage(r io.Reader, max int) (typ byte, msg []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 4 || n > uint32(max) {
		return 0, nil, fmt.Errorf("%w: type %q, %d bytes", errMessageLength, hdr[0], n)
	}
	msg = make([]byte, 1+n)
	copy(msg, hdr[:])
	if _, err := io.ReadFull(r, msg[5:]); err != nil {
		return 0, nil, err
	}
	return hdr[0], msg, nil
}

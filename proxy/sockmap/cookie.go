package sockmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Cookie returns the kernel's cookie of the socket fd (SO_COOKIE).
func Cookie(fd int) (uint64, error) {
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		return 0, fmt.Errorf("SO_COOKIE: %w", err)
	}
	return c, nil
}

// sock_diag for AF_UNIX (linux/unix_diag.h).
const (
	udiagShowPeer = 0x4
	unixDiagPeer  = 2
)

// PeerCookie returns the cookie of the socket at the other end of the connected
// unix socket fd: the socket a verdict program sees as the sender of what fd
// receives.
func PeerCookie(fd int) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	nl, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, fmt.Errorf("sock_diag socket: %w", err)
	}
	defer unix.Close(nl)
	_, attrs, err := unixDiag(nl, uint32(st.Ino), udiagShowPeer)
	if err != nil {
		return 0, err
	}
	peer, ok := attrs[unixDiagPeer]
	if !ok || len(peer) < 4 {
		return 0, errors.New("sock_diag: socket has no peer")
	}
	cookie, _, err := unixDiag(nl, binary.NativeEndian.Uint32(peer), 0)
	return cookie, err
}

// unixDiag asks for the unix socket with inode ino and returns its cookie and
// attributes.
func unixDiag(nl int, ino, show uint32) (uint64, map[uint16][]byte, error) {
	req := make([]byte, unix.NLMSG_HDRLEN+24)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST)
	b := req[unix.NLMSG_HDRLEN:]
	b[0] = unix.AF_UNIX
	binary.NativeEndian.PutUint32(b[4:], ^uint32(0)) // every state
	binary.NativeEndian.PutUint32(b[8:], ino)
	binary.NativeEndian.PutUint32(b[12:], show)
	binary.NativeEndian.PutUint32(b[16:], ^uint32(0)) // no cookie to check
	binary.NativeEndian.PutUint32(b[20:], ^uint32(0))
	if err := unix.Sendto(nl, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, nil, fmt.Errorf("sock_diag: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(nl, buf, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("sock_diag: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil || len(msgs) == 0 {
		return 0, nil, fmt.Errorf("sock_diag: bad answer: %v", err)
	}
	m := msgs[0]
	if m.Header.Type == unix.NLMSG_ERROR {
		if len(m.Data) >= 4 {
			if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
				return 0, nil, fmt.Errorf("sock_diag inode %d: %w", ino, unix.Errno(-e))
			}
		}
		return 0, nil, fmt.Errorf("sock_diag inode %d: error", ino)
	}
	if len(m.Data) < 16 {
		return 0, nil, errors.New("sock_diag: short answer")
	}
	cookie := uint64(binary.NativeEndian.Uint32(m.Data[8:])) | uint64(binary.NativeEndian.Uint32(m.Data[12:]))<<32
	attrs := map[uint16][]byte{}
	for a := m.Data[16:]; len(a) >= 4; {
		l := int(binary.NativeEndian.Uint16(a))
		if l < 4 || l > len(a) {
			break
		}
		attrs[binary.NativeEndian.Uint16(a[2:])] = a[4:l]
		a = a[min((l+3)&^3, len(a)):]
	}
	return cookie, attrs, nil
}

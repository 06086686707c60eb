package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"go.uber.org/zap"
)

// maxBackendStartupMessage bounds messages read from a branch server before the
// relay starts (authentication, parameter status, key data).
const maxBackendStartupMessage = 1 << 20

// handle serves one client connection from accept to close.
func (s *Server) handle(conn net.Conn) {
	defer s.untrack(conn)
	defer conn.Close()
	log := s.log.With(zap.Stringer("remote", conn.RemoteAddr()))
	conn.SetDeadline(time.Now().Add(s.cfg.StartupTimeout))
	version, params, err := s.readClientStartup(conn, log)
	if err != nil {
		if errors.Is(err, errProtocol) || errors.Is(err, errNotSupported) {
			s.refuse(conn, log, err)
		} else if ce := log.Check(zap.DebugLevel, "client left during startup"); ce != nil {
			ce.Write(zap.Error(err))
		}
		return
	}
	if params == nil {
		return // a cancel request, handled
	}
	conn.SetDeadline(time.Time{})
	route, err := router.Parse(params, s.cfg.DefaultBranch)
	if err != nil {
		s.refuse(conn, log, err)
		return
	}
	log = log.With(zap.String("database", route.Database), zap.String("branch", route.Branch), zap.String("user", params["user"]))
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.AcquireTimeout)
	defer cancel()
	start := time.Now()
	lease, err := s.branches.Acquire(ctx, route)
	if err != nil {
		s.refuse(conn, log, err)
		return
	}
	defer lease.Release()
	backend, err := lease.Dial(ctx)
	if err != nil {
		s.refuse(conn, log, fmt.Errorf("dial branch server: %w", err))
		return
	}
	defer backend.Close()
	pid, secret, err := s.login(conn, backend, version, route.Params, lease)
	if err != nil {
		if ce := log.Check(zap.DebugLevel, "login to branch ended"); ce != nil {
			ce.Write(zap.Error(err))
		}
		return
	}
	if pid != 0 {
		defer s.cancels.revoke(pid, secret)
	}
	if ce := log.Check(zap.DebugLevel, "session started"); ce != nil {
		ce.Write(zap.Duration("startup", time.Since(start)))
	}
	relay(conn, backend)
}

// readClientStartup reads packets until a StartupMessage, answering SSLRequest and
// GSSENCRequest with 'N' and forwarding a CancelRequest (then params is nil).
func (s *Server) readClientStartup(conn net.Conn, log *zap.Logger) (uint32, map[string]string, error) {
	sawSSL, sawGSS := false, false
	for {
		code, body, err := readStartup(conn, s.cfg.MaxStartupPacket)
		if err != nil {
			if errors.Is(err, errStartupLength) {
				return 0, nil, fmt.Errorf("%w: %v", errProtocol, err)
			}
			return 0, nil, err
		}
		switch {
		case code == codeSSL && !sawSSL && len(body) == 4:
			sawSSL = true
			if _, err := conn.Write([]byte{'N'}); err != nil {
				return 0, nil, err
			}
		case code == codeGSSENC && !sawGSS && len(body) == 4:
			sawGSS = true
			if _, err := conn.Write([]byte{'N'}); err != nil {
				return 0, nil, err
			}
		case code == codeCancel:
			s.handleCancel(body, log)
			return 0, nil, nil
		case code&majorVersion == protocolV3:
			// Decode as 3.0 whatever the minor version: the parameters are framed the
			// same way, and the branch server negotiates the version with the client.
			msg := pgproto3.StartupMessage{}
			b := append([]byte(nil), body...)
			binary.BigEndian.PutUint32(b, protocolV3)
			if err := msg.Decode(b); err != nil {
				return 0, nil, fmt.Errorf("%w: invalid startup packet", errProtocol)
			}
			if err := checkParams(msg.Parameters); err != nil {
				return 0, nil, err
			}
			return code, msg.Parameters, nil
		default:
			return 0, nil, fmt.Errorf("%w: unsupported frontend protocol %d.%d: server supports 3.0 to 3.2",
				errProtocol, code>>16, code&0xffff)
		}
	}
}

// checkParams refuses what a branch session cannot be.
func checkParams(p map[string]string) error {
	if v, ok := p["replication"]; ok {
		switch strings.ToLower(v) {
		case "false", "off", "no", "0":
		default:
			return fmt.Errorf("%w: replication connections are not supported through pgbranchproxy", errNotSupported)
		}
	}
	if p["user"] == "" {
		return fmt.Errorf("%w: no PostgreSQL user name specified in startup packet", errProtocol)
	}
	return nil
}

func (s *Server) handleCancel(body []byte, log *zap.Logger) {
	var req pgproto3.CancelRequest
	if err := req.Decode(body); err != nil {
		return
	}
	s.Stats.Cancels.Add(1)
	t, ok := s.cancels.lookup(req.ProcessID, req.SecretKey)
	if !ok {
		return
	}
	if err := t.forward(s.cfg.CancelTimeout); err != nil {
		log.Warn("forward cancel request", zap.String("session", t.issuedFor), zap.Error(err))
	}
}

// refuse tells the client why it cannot connect, logging internal errors once with
// the id the client sees.
func (s *Server) refuse(conn net.Conn, log *zap.Logger, err error) {
	s.Stats.Refused.Add(1)
	ce := classify(err)
	if ce.id != "" {
		log.Error("connection failed", zap.String("error_id", ce.id), zap.Error(err))
	} else if c := log.Check(zap.InfoLevel, "connection refused"); c != nil {
		c.Write(zap.String("sqlstate", ce.code), zap.Error(err))
	}
	conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	writeError(conn, ce)
}

// login sends the rewritten startup packet to the branch server and relays the
// authentication and start-up messages until ReadyForQuery, replacing the server's
// BackendKeyData with a key the proxy issues. It returns the issued key.
func (s *Server) login(client, backend net.Conn, version uint32, params map[string]string, lease Lease) (uint32, []byte, error) {
	startup, err := (&pgproto3.StartupMessage{ProtocolVersion: version, Parameters: params}).Encode(nil)
	if err != nil {
		return 0, nil, err
	}
	if _, err := backend.Write(startup); err != nil {
		return 0, nil, err
	}
	var pid uint32
	var secret []byte
	for {
		typ, msg, err := readMessage(backend, maxBackendStartupMessage)
		if err != nil {
			return pid, secret, fmt.Errorf("read from branch server: %w", err)
		}
		switch typ {
		case 'K':
			var kd pgproto3.BackendKeyData
			if err := kd.Decode(msg[5:]); err != nil {
				return pid, secret, err
			}
			pid, secret = s.cancels.issue(cancelTarget{dial: lease.Dial, pid: kd.ProcessID, secret: kd.SecretKey, issuedFor: params["database"]})
			msg, err = (&pgproto3.BackendKeyData{ProcessID: pid, SecretKey: secret}).Encode(nil)
			if err != nil {
				return pid, secret, err
			}
		case 'R':
			if _, err := client.Write(msg); err != nil {
				return pid, secret, err
			}
			if len(msg) >= 9 && needsResponse(binary.BigEndian.Uint32(msg[5:9])) {
				_, resp, err := readMessage(client, s.cfg.MaxStartupPacket)
				if err != nil {
					return pid, secret, err
				}
				if _, err := backend.Write(resp); err != nil {
					return pid, secret, err
				}
			}
			continue
		}
		if _, err := client.Write(msg); err != nil {
			return pid, secret, err
		}
		switch typ {
		case 'Z':
			return pid, secret, nil
		case 'E':
			return pid, secret, io.EOF
		}
	}
}

// needsResponse reports whether an Authentication message of this kind expects the
// client to answer (cleartext, MD5, SASL and its continuation, GSS).
func needsResponse(kind uint32) bool {
	switch kind {
	case 3, 5, 7, 8, 9, 10, 11:
		return true
	}
	return false
}

// relay copies bytes both ways until either side closes, then closes both and waits
// for both copies to finish.
func relay(client, backend net.Conn) {
	errc := make(chan error, 2)
	go func() { _, err := io.Copy(backend, client); errc <- err }()
	go func() { _, err := io.Copy(client, backend); errc <- err }()
	<-errc
	client.Close()
	backend.Close()
	<-errc
}

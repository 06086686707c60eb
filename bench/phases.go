package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// connectPhase is one step of a connect-per-transaction session, as pgbench -C
// makes it with sslmode=disable.
type connectPhase struct {
	name string
	note string
}

var connectPhases = []connectPhase{
	{"tcp", "TCP connect returned"},
	{"startup", "startup packet written to ReadyForQuery read (trust: no password exchange)"},
	{"query", "SELECT 1 written to its ReadyForQuery read"},
}

// phaseTarget is where a phase run connects: a TCP address and a database name.
type phaseTarget struct {
	name, addr, db string
}

// connectPhaseTimes times each phase of a session, connect by connect, through the
// proxy with server-session reuse and through PgBouncer, taking turns so that both
// see the same machine. It says where a connect through the proxy spends time that
// one through PgBouncer does not (connect_per_txn_ratio/proxy_reuse_vs_pgbouncer).
func connectPhaseTimes(ctx context.Context, e *env, targets []phaseTarget, rep *report) error {
	cfg := e.cfg
	perRound := 200
	if cfg.quick {
		perRound = 50
	}
	// times[target][phase] holds every sample; medians[target][phase] one median a round.
	times := make([][][]float64, len(targets))
	medians := make([][][]float64, len(targets))
	for i := range targets {
		times[i] = make([][]float64, len(connectPhases))
		medians[i] = make([][]float64, len(connectPhases))
	}
	for r := range cfg.rounds + 1 {
		round := make([][][]float64, len(targets))
		for i := range targets {
			round[i] = make([][]float64, len(connectPhases))
		}
		for range perRound {
			for _, i := range rotation(len(targets), r) {
				ds, err := sessionPhases(ctx, targets[i].addr, targets[i].db)
				if err != nil {
					return fmt.Errorf("connect phases through %s: %w", targets[i].name, err)
				}
				for p, d := range ds {
					round[i][p] = append(round[i][p], float64(d)/float64(time.Microsecond))
				}
			}
		}
		if r == 0 {
			continue // warm-up
		}
		for i := range targets {
			for p := range connectPhases {
				times[i][p] = append(times[i][p], round[i][p]...)
				medians[i][p] = append(medians[i][p], percentile(round[i][p], 50))
			}
		}
	}
	for p, ph := range connectPhases {
		for i, t := range targets {
			rep.percentiles("connect_phase_us/"+ph.name, t.name, "us", times[i][p], false, ph.note+", connects taking turns")
		}
		if len(targets) == 2 {
			rep.series(fmt.Sprintf("connect_phase_ratio/%s/%s_vs_%s", ph.name, targets[0].name, targets[1].name), "ratio",
				pairedRatios(medians[0][p], medians[1][p]), "round medians, paired by round")
		}
	}
	return nil
}

// sessionPhases opens one session on addr to db as user postgres, runs SELECT 1,
// sends Terminate and closes, and returns how long each of connectPhases took.
func sessionPhases(ctx context.Context, addr, db string) ([]time.Duration, error) {
	var d net.Dialer
	t0 := time.Now()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	t1 := time.Now()
	c.SetDeadline(t1.Add(10 * time.Second))
	if _, err := c.Write(startupPacket("postgres", db)); err != nil {
		return nil, err
	}
	if err := readUntilReady(c); err != nil {
		return nil, fmt.Errorf("startup: %w", err)
	}
	t2 := time.Now()
	if _, err := c.Write([]byte("Q\x00\x00\x00\x0dSELECT 1\x00")); err != nil {
		return nil, err
	}
	if err := readUntilReady(c); err != nil {
		return nil, fmt.Errorf("SELECT 1: %w", err)
	}
	t3 := time.Now()
	_, err = c.Write([]byte{'X', 0, 0, 0, 4})
	return []time.Duration{t1.Sub(t0), t2.Sub(t1), t3.Sub(t2)}, err
}

// startupPacket is a protocol 3.0 StartupMessage for user and database.
func startupPacket(user, database string) []byte {
	b := make([]byte, 8, 64)
	binary.BigEndian.PutUint32(b[4:], 3<<16)
	for _, s := range []string{"user", user, "database", database} {
		b = append(append(b, s...), 0)
	}
	b = append(b, 0)
	binary.BigEndian.PutUint32(b, uint32(len(b)))
	return b
}

// readUntilReady reads backend messages up to and including ReadyForQuery. An
// ErrorResponse is returned as an error with its fields.
func readUntilReady(c net.Conn) error {
	var head [5]byte
	for {
		if _, err := io.ReadFull(c, head[:]); err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint32(head[1:])) - 4
		if n < 0 || n > 1<<20 {
			return fmt.Errorf("message %q of length %d", head[0], n+4)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(c, body); err != nil {
			return err
		}
		switch head[0] {
		case 'Z':
			return nil
		case 'E':
			return errors.New("server error: " + errorMessage(body))
		case 'R':
			if n < 4 || binary.BigEndian.Uint32(body) != 0 {
				return errors.New("the server asked for a password")
			}
		}
	}
}

// errorMessage is the M field of an ErrorResponse's body.
func errorMessage(body []byte) string {
	for len(body) > 1 {
		end := bytes.IndexByte(body[1:], 0)
		if end < 0 {
			break
		}
		if body[0] == 'M' {
			return string(body[1 : 1+end])
		}
		body = body[2+end:]
	}
	return "(no message)"
}

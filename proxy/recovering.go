package proxy

import (
	"context"
	"errors"
	"time"
)

// Postgres's refusals (57P03) of a session while its postmaster starts or
// recovers from a crash: after a backend was killed (at a container's memory
// limit, say) the postmaster ends the other sessions, recovers, and takes new ones
// again, in a second or so.
var recoveryRefusals = map[string]bool{
	"the database system is in recovery mode":              true, // ending the other sessions
	"the database system is starting up":                   true,
	"the database system is not yet accepting connections": true, // replaying WAL
}

// A session waiting for a recovering server asks again after recoveryPoll, then
// after twice as long each time up to recoveryPollMax: every try forks a process
// in the server, and many clients asking ten times a second would slow the
// recovery they wait for (and, at a container's pids limit, be refused for want
// of processes rather than wait).
const (
	recoveryPoll    = 100 * time.Millisecond
	recoveryPollMax = 500 * time.Millisecond
)

// recovering reports whether err is a branch server's refusal while it recovers.
func recovering(err error) bool {
	var be *backendError
	return errors.As(err, &be) && be.code == codeCannotConnectNow && recoveryRefusals[be.text]
}

// dialRecovered waits for a branch server that refused a session as recovering
// (err), asking again less often as it goes (recoveryPoll) until it takes the
// session, refuses it otherwise, or ctx (the acquire deadline, --startup-timeout)
// ends: the client
// waits for the branch to come back as it waits for one to wake, and gets the
// server's refusal only when it did not in time.
func dialRecovered(ctx context.Context, lease Lease, params map[string]string, err error) (*serverConn, error) {
	for wait := recoveryPoll; ; wait = min(2*wait, recoveryPollMax) {
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		sc, derr := dialServer(ctx, lease.Dial, params)
		late := pastDeadline(ctx)
		if derr == nil || !late && !recovering(derr) {
			return sc, derr
		}
		if late {
			return nil, err // the deadline cut the last try short: the server's word
		}
		err = derr
	}
}

// pastDeadline reports whether ctx has ended or its deadline has passed (a socket
// deadline set from it may fire before ctx is cancelled).
func pastDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(d)
}

package proxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/errs"
)

// A write that finds its branch lost fails with ErrLost and ErrFenced at once:
// the client is told the branch was lost, which it can act on.
func TestClassifyLostBeforeFenced(t *testing.T) {
	err := fmt.Errorf("record stop: %w: %w", errs.ErrFenced, errs.ErrLost)
	if ce := classify(err); ce.message != "the branch was on a lost node" {
		t.Fatalf("classified as %q, want the branch lost", ce.message)
	}
}

// A ClientError reaches the client as it says, wrapped or not, with its cause
// kept out of what the client reads.
func TestClassifyClientError(t *testing.T) {
	err := fmt.Errorf("dial branch server: %w", &ClientError{Code: "57P03", Message: "node down", Hint: "later",
		Err: fmt.Errorf("dial tcp 10.0.0.1:5: connection refused")})
	ce := classify(err)
	if ce.code != "57P03" || ce.message != "node down" || ce.hint != "later" || ce.detail != "" || ce.id != "" {
		t.Fatalf("classified as %+v", ce)
	}
}

// A name another node took while this one created it asks the client to retry.
func TestClassifyNameTakenElsewhere(t *testing.T) {
	err := fmt.Errorf("record new branch: %w", fmt.Errorf("%w (on another node): x", errs.ErrExists))
	if ce := classify(err); ce.code != "57P03" || ce.id != "" {
		t.Fatalf("classified as %+v", ce)
	}
}

// A branch whose seed is on another host gets 57P03 saying so.
func TestClassifyLayerMissing(t *testing.T) {
	err := fmt.Errorf("start: %w: /var/lib/x/seeds/app/g1/data", errs.ErrLayerMissing)
	if ce := classify(err); ce.code != "57P03" || ce.id != "" || ce.detail != "" {
		t.Fatalf("classified as %+v", ce)
	}
}

// A branch of a source removed meanwhile (on another node) is refused as of an
// unknown source: 3D000, not an internal error.
func TestClassifySourceRemoved(t *testing.T) {
	err := fmt.Errorf("record new branch: %w: %w", errs.ErrNotFound, errors.New(`branch "x" of source "s": no such source`))
	if ce := classify(err); ce.code != "3D000" || ce.id != "" {
		t.Fatalf("classified as %+v", ce)
	}
}

// A start-up that failed once its own deadline had passed is 57P03, whichever
// step noticed it first: the context, or a socket deadline set from it (which
// may fire before the context is cancelled). An engine error that names its
// cause keeps it, and a failure before the deadline stays what it was.
func TestClassifyOutOfTime(t *testing.T) {
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	for _, err := range []error{
		fmt.Errorf("dial branch server: %w", context.DeadlineExceeded),
		fmt.Errorf("read startup response: %w", os.ErrDeadlineExceeded),
	} {
		if ce := classify(outOfTime(past, err)); ce.code != "57P03" || ce.id != "" {
			t.Errorf("%v: classified as %+v", err, ce)
		}
	}
	if ce := classify(outOfTime(past, errs.ErrClosed)); ce.code != "57P01" {
		t.Errorf("closed, out of time: classified as %+v, want the shutdown's 57P01", ce)
	}
	future, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	inner := fmt.Errorf("wait for postgres to accept connections: %w", context.DeadlineExceeded)
	if ce := classify(outOfTime(future, inner)); ce.code != "XX000" || ce.id == "" {
		t.Errorf("an operation's own timeout, with time left: classified as %+v, want an internal error", ce)
	}
}

// Each engine error reaches the client with its own SQLSTATE and words, wrapped
// however deep, and a start that failed outside Postgres carries an error id.
func TestClassifyEngineErrors(t *testing.T) {
	for _, tc := range []struct {
		err        error
		code, word string
	}{
		{errs.ErrNotFound, "3D000", "no such source or branch"},
		{errs.ErrExists, "57P03", "being created elsewhere"},
		{errs.ErrOtherParent, "42P04", "made from another parent"},
		{errs.ErrNotReady, "57P03", "still starting up"},
		{errs.ErrBusy, "55006", "in use by other sessions"},
		{errs.ErrEnded, "57P01", "stopped or destroyed by an administrator"},
		{errs.ErrNotGone, "57P03", "could not be destroyed yet"},
		{errs.ErrClosed, "57P01", "shutting down"},
		{errs.ErrInvalid, "22023", "invalid branch request"},
		{errs.ErrCatalogUnavailable, "57P03", "catalog unavailable"},
		{errs.ErrDraining, "57P03", "draining"},
		{errs.ErrQuota, "53100", "over its disk quota"},
		{errs.ErrDiskFull, "53100", "no disk budget left"},
		{errs.ErrNoSpace, "53100", "disk that holds the branches is full"},
		{errs.ErrTooMany, "53300", "too many branches are running"},
		{errs.ErrTooManySessions, "53300", "too many sessions on this branch"},
		{errs.ErrStartFailed, "58000", "did not start"},
	} {
		ce := classify(fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", tc.err)))
		if ce.code != tc.code || !strings.Contains(ce.message, tc.word) {
			t.Errorf("%v: classified as %+v, want %s and %q", tc.err, ce, tc.code, tc.word)
		}
		if (ce.id != "") != (tc.code == "58000") || (ce.id != "" && !strings.Contains(ce.hint, "error id")) {
			t.Errorf("%v: error id %q, hint %q", tc.err, ce.id, ce.hint)
		}
	}
}

// When one chain holds several engine errors, the client is told of the cause
// rather than the step it stopped: a start that failed for want of disk is
// 53100, a shutdown that cut a wait for readiness is 57P01, and a deadline that
// ran out while the engine named why says why.
func TestClassifyCauseBeforeStep(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code string
		want error
	}{
		{fmt.Errorf("start branch: %w: %w", errs.ErrStartFailed, fmt.Errorf("x: %w", errs.ErrNoSpace)), "53100", errs.ErrNoSpace},
		{fmt.Errorf("branch: %w: %w", errs.ErrNotGone, errs.ErrCatalogUnavailable), "57P03", errs.ErrCatalogUnavailable},
		{errors.Join(errs.ErrNotReady, errs.ErrClosed), "57P03", errs.ErrNotReady},
		{fmt.Errorf("%w: %w", errTimedOut, errs.ErrTooMany), "53300", errs.ErrTooMany},
		{fmt.Errorf("%w: %w", errs.ErrNodeLost, errs.ErrFenced), "57P03", errs.ErrNodeLost},
	} {
		ce := classify(tc.err)
		want := tc.want.(toldError)
		if ce.code != tc.code || ce.message != want.ClientMessage() {
			t.Errorf("%v: classified as %+v, want %q", tc.err, ce, want.ClientMessage())
		}
	}
}

// A start that failed once the client's own deadline had passed is told to try
// again (57P03), as before the engine's errors said their own words: only a start
// failure ranks after the clock running out.
func TestClassifyStartFailedOutOfTime(t *testing.T) {
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	err := fmt.Errorf("start branch %q: %w: %w", "x", errs.ErrStartFailed, errors.New("postgres exited"))
	if ce := classify(outOfTime(past, err)); ce.code != "57P03" || ce.message != "timed out preparing the branch" {
		t.Errorf("a start that failed out of time: classified as %+v, want 57P03 timed out", ce)
	}
	if ce := classify(err); ce.code != "58000" || ce.id == "" {
		t.Errorf("a start that failed in time: classified as %+v, want 58000 with an error id", ce)
	}
}
